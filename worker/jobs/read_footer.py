"""The line closing every answer from code: the commit of each repo it read and how old it is,
and the refreshes under way to a newer commit of those repos.

"_Read `payments` at `abc1234` (committed 3 d ago, fetched 2 min ago)._" The ages are
worker/repos/freshness.py's. A repo counts as read when a tool showed lines or commits of it;
an answer from listings alone names every repo in scope. At most FOOTER_REPOS_SHOWN repos are
named (those with a refresh under way first, then those cited, then by name); the rest are
counted. Nothing the repo wrote (a commit message, a ref name) enters it: repo names are the
operator's, shas are hex, ages are numbers.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping

from redis import Redis
from redis.exceptions import RedisError

from worker.agent.citations import CheckedAnswer
from worker.jobs import texts
from worker.jobs.refresh_watch import refreshes_under_way
from worker.repos.freshness import age_text
from worker.repos.git_read import GitReadError, run_git
from worker.repos.snapshot import Snapshot
from worker.tools.context import ToolContext

log = logging.getLogger("codebot.job")

FOOTER_REPOS_SHOWN = 3
ANCESTRY_SECONDS = 2.0  # for `git merge-base --is-ancestor` in a local mirror: milliseconds


def repos_read(ctx: ToolContext) -> list[str]:
    """The repos in scope whose lines or commits a tool showed; all of them when none was."""
    shown = {repo for repo, _path in ctx.shown.files()}
    shown.update(repo for repo, shas in ctx.history.commits.items() if shas)
    return sorted(name for name in ctx.snapshots if name in shown) or sorted(ctx.snapshots)


def read_footer(
    read: Mapping[str, Snapshot], under_way: Mapping[str, str], cited: set[str], now: float
) -> str:
    """The footer for the snapshots `read` (by repo), at `now`; `under_way`: repo -> the sha a
    refresh of it is fetching (one equal to the commit read is not news and not said)."""
    if not read:
        return ""
    newer = {name: sha for name, sha in under_way.items() if name in read and sha != read[name].sha}
    order = sorted(read, key=lambda name: (name not in newer, name not in cited, name))
    shown = order[:FOOTER_REPOS_SHOWN]
    if len(order) - len(shown) == 1:  # "1 more repo" takes the room of naming it
        shown = order
    commits = [
        texts.READ_COMMIT.format(
            repo=name,
            sha=read[name].short_sha,
            age=age_text(read[name].committed_at, read[name].created_at, now),
        )
        for name in shown
    ]
    if len(order) > len(shown):
        commits.append(texts.READ_MORE.format(count=len(order) - len(shown)))
    lines = [texts.READ_FOOTER.format(commits=", ".join(commits))]
    refreshing = [texts.READ_REFRESHING_REPO.format(repo=n, sha=newer[n][:7]) for n in shown if n in newer]
    if refreshing:
        lines.append(texts.READ_REFRESHING.format(repos=", ".join(refreshing)))
    return "\n".join(lines)


def with_read_footer(redis: Redis, ctx: ToolContext, checked: CheckedAnswer) -> CheckedAnswer:
    """`checked` closed by the footer of what it read; the refreshes under way are left out when
    Redis cannot say (the answer matters more than the note)."""
    try:
        under_way = refreshes_under_way(redis, repos_read(ctx))
    except RedisError as exc:
        log.warning("refreshes under way not known for the answer's footer: %s", exc)
        under_way = {}
    newer = {name: sha for name, sha in under_way.items() if not _contains(ctx.snapshots[name], sha)}
    return with_footer(ctx, checked, newer)


def _contains(snapshot: Snapshot, pushed: str) -> bool:
    """Is the pushed commit the one read or one of its ancestors (a refresh for an earlier push,
    still running, whose fetch this snapshot came from)? False when the mirror cannot say, as
    when the push is not fetched yet."""
    if pushed == snapshot.sha:
        return True
    if snapshot.git_dir is None:
        return False
    try:
        run_git(
            snapshot.git_dir, ["merge-base", "--is-ancestor", pushed, snapshot.sha], ANCESTRY_SECONDS, 1000
        )
    except GitReadError:
        return False  # exit 1: not an ancestor; or no such commit here yet
    return True


def with_footer(ctx: ToolContext, checked: CheckedAnswer, under_way: Mapping[str, str]) -> CheckedAnswer:
    """`checked` closed by the footer of what it read, now (MCP's ask: no refreshes known)."""
    read = {name: ctx.snapshots[name] for name in repos_read(ctx)}
    cited = {source.repo for source in checked.sources}
    footer = read_footer(read, under_way, cited, time.time())
    return dataclasses.replace(checked, markdown=f"{checked.markdown}\n\n{footer}") if footer else checked
