"""Every text `codebot webhooks` says: to a forge (each response's verdict), and at start.

A forge shows the response body in its delivery log, so each verdict says what was done and,
when nothing was, why.
"""

from __future__ import annotations

# --- verdicts: the response body's "verdict" (docs/webhooks.md, "What each status means") -------
QUEUED = "refresh queued"
ABSORBED = "refresh already waiting: it will fetch this push too"
PONG = "pong: the webhook reaches codebot"
REPLAY = "already received: a delivery is acted on once"
NOT_A_PUSH = "ignored: not a push event"
UNKNOWN_REPO = "ignored: no whitelisted repo has this URL"
OTHER_BRANCH = "ignored: not the branch codebot follows"
BAD_SIGNATURE = "refused: bad or missing signature"
NOT_A_FORGE = "refused: no forge event header (X-GitHub-Event, X-Gitlab-Event, X-Gitea-Event, X-Event-Key)"
NOT_JSON = "refused: the body is not a JSON object (set the webhook's content type to application/json)"
TOO_LARGE = "refused: the body is larger than CODEBOT_WEBHOOKS_MAX_BODY_BYTES"
BAD_LENGTH = "refused: Content-Length is not a number"
QUEUE_DOWN = "not received: the queue (Redis) is unreachable; send it again later"
NOT_FOUND = "not found: deliveries go to POST /webhooks"
WRONG_METHOD = "method not allowed: deliveries are POSTed"

# --- at start (config/errors.py: one line, never a traceback) ----------------------------------
NO_SECRET = (
    "CODEBOT_WEBHOOKS_GITHUB_SECRET (or _GITLAB_, _GITEA_, _BITBUCKET_): none set, and no repo in the "
    'repos file has a webhook_secret — every delivery would be refused (make one with `python -c "import '
    'secrets; print(secrets.token_urlsafe(32))"`)'
)


def secret_variable_unset(where: str, repo: str, variable: str) -> str:
    return f"{where}: webhook_secret of repo {repo!r} names ${{{variable}}}, which is not set — export it"


def listening(where: str) -> str:
    return f"codebot webhooks: receiving forge pushes on {where}webhooks"
