"""What the system prompt, the tools and the budgets do to hops and verified citations.

A scripted model (tests/support/golden_policy.py: an ideal instruction-follower that knows
the golden answers) runs the shipped golden set (eval/golden.jsonl) through the real agent,
tools and citation checker, over a mirror of this repository (its committed code and its
history), once per prompt variant and hop budget; the history questions (those with expected
commits) get a table of their own. Then find_definition is compared with search + read_file for
every top-level function and class under worker/. Prints Markdown tables (bench/RESULTS.md).

Run: .venv/bin/python eval/mechanics.py   (~20 s)
"""

from __future__ import annotations

import csv
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

from config.settings import Settings, load_settings  # noqa: E402
from tests.support import this_repo as checkout  # noqa: E402
from tests.support.golden_policy import GoldenPolicy  # noqa: E402
from tests.support.model_server import ScriptedModel  # noqa: E402
from worker.agent import prompt  # noqa: E402
from worker.jobs.evaluate import load_golden, run_eval  # noqa: E402
from worker.jobs.runtime import build_runtime  # noqa: E402
from worker.ops.redis_connection import stop_embedded_server  # noqa: E402
from worker.repos.symbols import open_index  # noqa: E402
from worker.tools import build_registry, make_context  # noqa: E402

GOLDEN = ROOT / "eval" / "golden.jsonl"
ALTERNATION = "use alternation like `retry|backoff`, and "
HISTORY_ADVICE = (
    "- For questions about history (who changed this, when, why; what changed since a release),\n"
    "  use the history tools: `log` lists commits that changed a path or whose message or changes\n"
    "  mention a text; `blame` shows which commit last changed given lines; `show` gives a commit's\n"
    '  message (the "why") and diff; `diff` compares two tags, branches or commits.\n'
)
READ_FIRST = (
    "- Read before you cite: cite only lines a tool showed you in this conversation. A search hit\n"
    "  shows one line: cite that line alone, or `read_file` the range first.\n"
)


def _without_layout(snapshot: Any) -> str:
    return "\n".join(line for line in ORIGINAL_DESCRIBE(snapshot).splitlines() if "top level:" not in line)


ORIGINAL_PROMPT, ORIGINAL_DESCRIBE = prompt.SYSTEM_PROMPT, prompt.describe_repo
VARIANTS: dict[str, Callable[[], None]] = {
    "shipped prompt": lambda: None,
    "no top-level layout": lambda: setattr(prompt, "describe_repo", _without_layout),
    "no alternation advice": lambda: setattr(
        prompt, "SYSTEM_PROMPT", ORIGINAL_PROMPT.replace(ALTERNATION, "")
    ),
    "no read-before-cite": lambda: setattr(prompt, "SYSTEM_PROMPT", ORIGINAL_PROMPT.replace(READ_FIRST, "")),
    "no history advice": lambda: setattr(
        prompt, "SYSTEM_PROMPT", ORIGINAL_PROMPT.replace(HISTORY_ADVICE, "")
    ),
}
assert HISTORY_ADVICE in ORIGINAL_PROMPT and READ_FIRST in ORIGINAL_PROMPT and ALTERNATION in ORIGINAL_PROMPT


@contextmanager
def variant(name: str) -> Iterator[None]:
    VARIANTS[name]()
    try:
        yield
    finally:
        prompt.SYSTEM_PROMPT, prompt.describe_repo = ORIGINAL_PROMPT, ORIGINAL_DESCRIBE


def this_repo(base: Path) -> Path:
    """A whitelist of this checkout as `codebot`: its committed code and its history."""
    return checkout.repos_file(base)


def run(settings: Settings, base: Path, label: str) -> dict[str, dict[str, Any]]:
    """Mean hops, verified citation rate, expected files and commits cited and prompt tokens, for
    the code questions and for the history questions."""
    out_csv = base / f"{label}.csv"
    with open(os.devnull, "w") as quiet:
        run_eval(settings, str(GOLDEN), str(out_csv), Console(file=quiet))
    history = {g.question for g in load_golden(GOLDEN) if g.expected_commits}
    rows = list(csv.DictReader(out_csv.open(encoding="utf-8")))
    summary = {}
    for kind, subset in (("code", [r for r in rows if r["question"] not in history]),
                         ("history", [r for r in rows if r["question"] in history])):  # fmt: skip
        verified = sum(int(r["verified"]) for r in subset)
        unverified = sum(int(r["unverified"]) for r in subset)
        summary[kind] = {
            "hops": statistics.mean(int(r["hops"]) for r in subset),
            "verified": verified / max(1, verified + unverified),
            "files": statistics.mean(float(r["expected_files_cited"]) for r in subset),
            "commits": statistics.mean(float(r["expected_commits_cited"]) for r in subset),
            "tokens": statistics.mean(int(r["tokens"]) for r in subset),
        }
    return summary


def prompt_and_budget_table(base: Path, repos_file: Path) -> None:
    golden = load_golden(GOLDEN)
    with ScriptedModel(GoldenPolicy(golden)) as model:
        common = {
            "data_dir": base / "data", "repos_file": repos_file, "openai_base_url": model.base_url,
            "openai_api_key": "k", "model_max_retries": 0,
        }  # fmt: skip
        settings = load_settings(env_file=None, **common)
        try:
            results = {}
            for name in VARIANTS:
                with variant(name):
                    results[name] = run(settings, base, name.replace(" ", "-"))
            budgets = {hops: run(load_settings(env_file=None, **common, max_hops=hops), base, f"hops{hops}")
                       for hops in (3, 2, 1)}  # fmt: skip
            print("Code questions:\n")
            print(
                "| prompt | max_hops | hops/question | verified citations | expected file cited | prompt tokens/question |"
            )
            print("|---|---:|---:|---:|---:|---:|")
            for label, hops, r in [*((n, 12, v["code"]) for n, v in results.items()),
                                   *(("shipped prompt", h, v["code"]) for h, v in budgets.items())]:  # fmt: skip
                print(
                    f"| {label} | {hops} | {r['hops']:.2f} | {r['verified']:.0%} | {r['files']:.0%} | {r['tokens']:.0f} |"
                )
            print("\nHistory questions (log, blame, show on this repo's own history):\n")
            print(
                "| prompt | max_hops | hops/question | verified citations | expected commit cited | prompt tokens/question |"
            )
            print("|---|---:|---:|---:|---:|---:|")
            for label, hops, r in [*((n, 12, v["history"]) for n, v in results.items()),
                                   *(("shipped prompt", h, v["history"]) for h, v in budgets.items())]:  # fmt: skip
                print(
                    f"| {label} | {hops} | {r['hops']:.2f} | {r['verified']:.0%} | {r['commits']:.0%} | {r['tokens']:.0f} |"
                )
        finally:
            stop_embedded_server(settings)
    print(
        f"\nsystem prompt: {len(prompt.build_system_prompt({}))} chars without repos; tool schemas: "
        f"{sum(len(str(s)) for s in build_registry().schemas())} chars sent with every hop"
    )


def definition_lookup_table(base: Path, repos_file: Path) -> None:
    settings = load_settings(env_file=None, data_dir=base / "data", repos_file=repos_file)
    runtime, registry = build_runtime(settings), build_registry()
    with runtime.mirrors.lease(["codebot"]) as snapshots:
        index = open_index(snapshots["codebot"].root, settings)
        symbols = index.top_level("worker/", ("function", "class"))
        index.close()
        cost: dict[str, list[tuple[int, int, bool]]] = {"search + read_file": [], "find_definition": []}
        for name, path, line, end in symbols:
            ctx = make_context(settings, snapshots)
            found = registry.call(ctx, "search", {"pattern": rf"(def|class) {name}\b", "repo": "codebot"})
            read = registry.call(ctx, "read_file", {"repo": "codebot", "path": path, "start_line": line,
                                                    "end_line": min(end, line + 7)})  # fmt: skip
            cost["search + read_file"].append(
                (
                    2,
                    len(found.text) + len(read.text),
                    ctx.shown.covers("codebot", path, line, min(end, line + 7)),
                )
            )
            ctx = make_context(settings, snapshots)
            defined = registry.call(ctx, "find_definition", {"symbol": name, "repo": "codebot"})
            cost["find_definition"].append(
                (1, len(defined.text), ctx.shown.covers("codebot", path, line, min(end, line + 7)))
            )
    print(f"\n{len(symbols)} top-level functions and classes under worker/: first 8 lines of each, citable\n")
    print("| how | tool calls | chars returned (median) | chars (p90) | first 8 lines citable |")
    print("|---|---:|---:|---:|---:|")
    for how, rows in cost.items():
        chars = sorted(r[1] for r in rows)
        print(
            f"| {how} | {rows[0][0]} | {statistics.median(chars):.0f} | {chars[int(len(chars) * 0.9)]} | "
            f"{sum(r[2] for r in rows) / len(rows):.0%} |"
        )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repos_file = this_repo(base)
        prompt_and_budget_table(base, repos_file)
        definition_lookup_table(base, repos_file)


if __name__ == "__main__":
    main()
