"""A scripted model that answers golden questions by following the system prompt's advice.

It stands in for an ideal instruction-follower, so the mechanics can be measured without an
LLM: it reads the system prompt it is sent and acts on what is (or is not) there.

- Orientation: without a non-empty "top level:" layout for the repo in the prompt, it first
  calls repo_overview (one extra hop).
- Search: with the prompt's alternation advice it runs one search `kw1|kw2`; without, one
  search per keyword, one hop each. When no shown hit is in an expected file (results are
  capped at 50), it searches again with that file as the glob, as the tool advises.
- Citing: with "Read before you cite" it reads 30 lines around the first hit in an expected
  file, then cites 6 of them; without, it cites 6 lines from the search hit directly (only the
  hit line was shown, so the citation cannot verify).
- The answer names every expected keyword (a perfect reader of the code).
- History questions (with expected commits) follow the prompt's history advice: `log` of the
  path the rule names (`last:`/`first:`) or of the text (`subject:`), `blame` of the file's first
  lines, `show` of the commit the rule asks for as the log listed it (newest for `last:`, oldest
  otherwise), then an answer citing [repo@sha] and lines the blame showed.

What it cannot show: whether a real model follows the advice, finds the right file from a
vague question, or writes a correct answer. It knows the golden expectations (an oracle).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tests.support.model_server import Reply, text, tool_calls
from worker.jobs.evaluate import GoldenQuestion

_HIT_FILE = re.compile(r"^(?P<repo>[a-z0-9._-]+):(?P<path>\S+)$")
_HIT_LINE = re.compile(r"^\s+(?P<line>\d+)│")
READ_BEFORE = 10
READ_AFTER = 20
CITED_LINES = 6


@dataclass
class GoldenPolicy:
    golden: list[GoldenQuestion]

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        system = str(messages[0]["content"])
        asked = [str(m["content"]) for m in messages if m["role"] == "user"]
        golden = next((g for g in self.golden if g.question in asked), None)
        if golden is None:
            return text("I do not know this question.")
        repo = golden.repo or "codebot"
        results = [str(m["content"]) for m in messages if m["role"] == "tool"]
        calls = [
            c["function"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []
        ]
        if (
            "tools" not in body or body.get("tool_choice") == "none"
        ):  # tools withdrawn: answer from what was found
            if golden.expected_commits and "history tools" in system:
                return text(_history_answer(golden, repo, results))
            return text(_answer(golden, repo, _first_hit(golden, results), read=_was_read(calls)))
        if golden.expected_commits and "history tools" in system:
            return _history_step(golden, repo, results, calls)
        oriented = _has_layout(system, repo) or any(c["name"] == "repo_overview" for c in calls)
        if not oriented:
            return tool_calls(("repo_overview", {"repo": repo}))
        searches = [c for c in calls if c["name"] == "search"]
        patterns = _patterns(golden, alternation="alternation" in system)
        if len(searches) < len(patterns):
            return tool_calls(("search", {"pattern": patterns[len(searches)], "repo": repo}))
        hit = _first_hit(golden, results)
        if (
            hit
            and hit[0] not in golden.expected_files
            and golden.expected_files
            and len(searches) == len(patterns)
        ):
            # Capped results all in other files: narrow with a glob, as the tool advises.
            glob = golden.expected_files[0]
            return tool_calls(("search", {"pattern": patterns[0], "repo": repo, "glob": glob}))
        if hit and "Read before you cite" in system and not _was_read(calls):
            path, line = hit
            start = max(1, line - READ_BEFORE)
            return tool_calls(
                (
                    "read_file",
                    {"repo": repo, "path": path, "start_line": start, "end_line": line + READ_AFTER},
                )
            )
        return text(_answer(golden, repo, hit, read=_was_read(calls)))


def _has_layout(system: str, repo: str) -> bool:
    block = system.split(f"- {repo}:", 1)[-1]
    match = re.search(r"top level: (.*)", block)
    return bool(match and match.group(1).strip() not in ("", "(empty)"))


def _patterns(golden: GoldenQuestion, alternation: bool) -> list[str]:
    words = [re.escape(k) for k in golden.expected_keywords] or ["TODO"]
    return ["|".join(words)] if alternation else words


def _first_hit(golden: GoldenQuestion, results: list[str]) -> tuple[str, int] | None:
    """The first search hit in an expected file (else the first hit at all)."""
    hits: list[tuple[str, int]] = []
    for result in results:
        path = None
        for line in result.splitlines():
            if found := _HIT_FILE.match(line):
                path = found.group("path")
            elif path and (number := _HIT_LINE.match(line)):
                hits.append((path, int(number.group("line"))))
    preferred = [h for h in hits if h[0] in golden.expected_files]
    return (preferred or hits or [None])[0]


def _was_read(calls: list[dict[str, Any]]) -> bool:
    return any(c["name"] == "read_file" for c in calls)


def _answer(golden: GoldenQuestion, repo: str, hit: tuple[str, int] | None, read: bool) -> str:
    words = ", ".join(f"`{k}`" for k in golden.expected_keywords)
    if hit is None:
        return f"I could not find it; I looked for {words}."
    path, line = hit
    return f"It comes down to {words}: see [{repo}:{path}#L{line}-L{line + CITED_LINES - 1}]."


_LOGGED = re.compile(r"^(?P<sha>[0-9a-f]{10}) \d{4}-\d{2}-\d{2} ", re.M)


def _history_step(
    golden: GoldenQuestion, repo: str, results: list[str], calls: list[dict[str, Any]]
) -> Reply:
    kind, _, value = golden.expected_commits[0].partition(":")
    done = [c["name"] for c in calls]
    if "log" not in done:
        where = {"query": value, "match": "message"} if kind == "subject" else {"path": value}
        return tool_calls(("log", {"repo": repo, **where, "limit": 50}))
    if kind != "subject" and "blame" not in done:
        return tool_calls(("blame", {"repo": repo, "path": value, "start_line": 1, "end_line": 20}))
    sha = _picked(kind, results)
    if sha and "show" not in done:
        return tool_calls(("show", {"repo": repo, "sha": sha}))
    return text(_history_answer(golden, repo, results))


def _picked(kind: str, results: list[str]) -> str | None:
    logged = next((r for r in results if "commit(s) of" in r.split("\n", 1)[0]), "")
    shas = _LOGGED.findall(logged)
    return (shas[0] if kind == "last" else shas[-1]) if shas else None


def _history_answer(golden: GoldenQuestion, repo: str, results: list[str]) -> str:
    kind, _, value = golden.expected_commits[0].partition(":")
    sha = _picked(kind, results)
    if sha is None:
        return "I could not find the commit in the history."
    lines = f" The code as it is now: [{repo}:{value}#L1-L{CITED_LINES}]." if kind != "subject" else ""
    return f"It was [{repo}@{sha[:7]}]; its message says why.{lines}"
