"""How old a commit codebot read is, in words: pure functions of the facts and a clock.

Two times are known of a snapshot (worker/repos/snapshot.py), and they are not equally true:

- `committed_at`, the commit's committer date, is what the repo says. Anyone who can push can
  set it to anything (a date in the future, 1970), and a rebase or a merge through a forge's
  web page moves it. Shown as "committed X ago", and only when it is believable.
- `fetched_at`, when codebot made the snapshot (right after the fetch that found the commit),
  is what codebot knows first-hand. Shown as "fetched X ago". With webhooks set up it is within
  seconds of the push.

Both are said when they differ ("committed 3 d ago, fetched 2 min ago": an old commit pushed or
merged just now); once when they round to the same words ("committed and fetched 3 min ago").
A commit dated after its fetch (more than CLOCK_SKEW_SECONDS later) is not believed: only the
fetch is said, with a note that the commit's date is not shown. Only numbers come out of here,
never anything the repo wrote.
"""

from __future__ import annotations

# Clocks of the committer's machine and of codebot's may disagree by this much before a commit
# dated after its fetch is taken for a wrong date rather than a skewed clock.
CLOCK_SKEW_SECONDS = 300.0

_UNITS = (("d", 86400), ("h", 3600), ("min", 60))


def duration_text(seconds: float) -> str:
    """A short human duration, rounded down: `40 s`, `12 min`, `5 h`, `3 d` (negative: `0 s`)."""
    whole = max(0, int(seconds))
    for unit, size in _UNITS:
        if whole >= size:
            return f"{whole // size} {unit}"
    return f"{whole} s"


def age_text(committed_at: float | None, fetched_at: float | None, now: float) -> str:
    """How old a commit read at `now` is: "committed 3 d ago, fetched 2 min ago",
    "committed and fetched 3 min ago", "fetched 2 min ago (commit date not shown: it is later
    than the fetch)", "committed 3 min ago" (no fetch time known), or "age unknown"."""
    if not fetched_at:
        if committed_at and committed_at <= now + CLOCK_SKEW_SECONDS:
            return f"committed {duration_text(now - committed_at)} ago"
        return "age unknown"
    fetched = duration_text(now - fetched_at)
    if not committed_at:
        return f"fetched {fetched} ago"
    if committed_at > fetched_at + CLOCK_SKEW_SECONDS:
        return f"fetched {fetched} ago (commit date not shown: it is later than the fetch)"
    committed = duration_text(now - committed_at)
    if committed == fetched:
        return f"committed and fetched {fetched} ago"
    return f"committed {committed} ago, fetched {fetched} ago"
