"""What one git blob becomes in the processed store: redacted text, or a placeholder saying why not.

A blob is processed from its bytes alone (never from a file name, which differs between the trees
that share the blob), so the result can be shared by every repo and snapshot on the host:

- **binary** (a NUL byte anywhere): its content is never kept; a placeholder records its size;
- **withheld**: a credentials file recognised by its content (a private key, a kubeconfig, netrc,
  pgpass, AWS credentials, a Docker auth config, an environment file holding secrets), or a blob
  that could not be processed within its time and memory bounds; a placeholder records why;
- **text**: decoded as UTF-8 (invalid bytes become U+FFFD, as `read_file` always showed them) and
  redacted (worker/repos/secrets/redaction.py), with exactly the lines of the original, so line numbers
  and citations hold.

Binary and withheld blobs are stored as placeholders (worker/repos/placeholders.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import re2

from worker.repos.placeholders import BINARY, TEXT, WITHHELD, placeholder
from worker.repos.secrets.redaction import Redactor, get_redactor


@dataclass(frozen=True)
class Processed:
    kind: str  # text, binary or withheld
    data: bytes  # what the snapshot holds: redacted text, or a placeholder
    lines: int
    reason: str | None = None  # why a withheld blob is withheld
    secrets: int = 0  # spans redacted


# --- credentials files, recognised by content -------------------------------------------------


def _re2(pattern: bytes) -> Any:
    """An RE2 regex (linear time on any input), as every pattern run over repo content is."""
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options=options)


_COMMENT_OR_BLANK = _re2(rb"^\s*(?:[#;].*)?$")
# dotenv and shell: KEY=value, no space around "=" (code writes `key = value`).
_ENV_LINE = _re2(rb"^\s*(?:export\s+)?[A-Za-z_][A-Za-z0-9_.]*=\S")
_INI_LINE = _re2(rb"^\s*[A-Za-z_][A-Za-z0-9_.-]*\s*=\s*\S")
_NETRC_LINE = _re2(rb"^\s*(?:machine|default|login|password|account|macdef)\b")
_PGPASS_LINE = _re2(rb"^[^:\s#]{1,253}:(?:\d{1,5}|\*):[^:\s]{1,63}:[^:\s]{1,63}:\S")
_INI_SECTION = _re2(rb"^\s*\[[^\]\n]{1,100}\]\s*$")
_AWS_SECRET = _re2(rb"(?im)^\s*aws_(?:secret_access_key|session_token)\s*=\s*\S")
_KUBECONFIG = _re2(rb"(?m)^kind:\s*[\"']?Config[\"']?\s*$")
_KUBE_USERS = _re2(rb"(?m)^users:\s*$")
_DOCKER_AUTHS = _re2(rb"\"auths\"\s*:\s*\{[^}]*\"auth\"\s*:")
_KEY_FILE_START = _re2(
    rb"^\s*(?:-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d)"
)
_MAX_FORMAT_LINES = 5000  # credentials files are short; longer texts are not checked line by line


def _content_lines(data: bytes) -> Callable[[], Iterator[bytes]] | None:
    """The non-blank, non-comment lines, each time read afresh and lazily (most texts fail a
    check on their first such line, so the rest are never matched), or None when there are too
    many lines for a credentials file."""
    if data.count(b"\n") > _MAX_FORMAT_LINES:
        return None
    split = data.split(b"\n")
    return lambda: (line for line in split if not _COMMENT_OR_BLANK.match(line))


def credentials_file(original: bytes, secrets: int) -> str | None:
    """Why a text is a credentials file to withhold whole, or None."""
    if _KEY_FILE_START.match(original):
        return "a private key file"
    if _KUBECONFIG.search(original) and _KUBE_USERS.search(original):
        return "a kubeconfig (cluster credentials)"
    if _DOCKER_AUTHS.search(original):
        return "a container registry auth config"
    lines = _content_lines(original)
    if lines is None or next(lines(), None) is None:
        return None
    if (
        b"password" in original  # a content line must hold it (cheap to rule out first)
        and all(_NETRC_LINE.match(line) for line in lines())
        and any(b"password" in line for line in lines())
    ):
        return "a netrc file (machine passwords)"
    if all(_PGPASS_LINE.match(line) for line in lines()):
        return "a PostgreSQL password file"
    if _AWS_SECRET.search(original) and all(
        _INI_SECTION.match(line) or _INI_LINE.match(line) for line in lines()
    ):
        return "an AWS credentials file"
    if secrets and all(_ENV_LINE.match(line) for line in lines()):
        return "an environment file holding secrets"
    return None


def process_blob(raw: bytes, redactor: Redactor) -> Processed:
    """Classify and redact one blob (pure; the time and memory bounds are the caller's)."""
    if b"\x00" in raw:
        return Processed(BINARY, placeholder(BINARY, len(raw)), 0)
    text = raw.decode("utf-8", "replace").encode("utf-8") if not raw.isascii() else raw
    redaction = redactor.redact_bytes(text, whole_file=True)
    secrets = sum(redaction.kinds.values())
    reason = credentials_file(text, secrets)
    if reason:
        return Processed(WITHHELD, placeholder(WITHHELD, len(raw), reason), 0, reason, secrets)
    return Processed(TEXT, redaction.data, redaction.lines, None, secrets)


def link_secret(target: bytes) -> str | None:
    """Why a symlink's target text is withheld by content, or None. git stores a link as a blob
    holding its target, so the target meets the rules a file's content meets: a credentials
    file is withheld, and so is a target holding any secret (a link has no lines to redact:
    `list_files` and `show` print its target whole)."""
    processed = process_blob(target, get_redactor())
    if processed.kind == WITHHELD:
        return processed.reason or "a credentials file"
    return "a symlink whose target holds a secret" if processed.secrets else None
