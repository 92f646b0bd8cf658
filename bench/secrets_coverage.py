"""How much of gitleaks' default rule set the redactor covers, what it flags by mistake, and its speed.

    .venv/bin/python bench/secrets_coverage.py [--no-stdlib]
    .venv/bin/python bench/secrets_coverage.py --profile   # only: CPU per rule kind, stdlib

Prints three tables:
  coverage         per context (alone, assignment, YAML, JSON, notebook output): the share of
                   gitleaks' rule families (tests/support/secret_corpus.py) whose sample is
                   redacted with no piece of it left, and the families missed; then the
                   documents the issue names (Kubernetes Secrets, .dockerconfigjson, Terraform
                   state, `*_KEY`/`*_PW`, INI, kubeconfig).
  false positives  redactions in two corpora that hold no real secret: this repository's
                   tracked text files, and the Python standard library's .py files; without
                   gitleaks' rules (ours and detect-secrets') and with them.
  throughput       MB/s of `Redactor.redact_bytes` over the same corpora, without and with
                   gitleaks' rules, and the ratio (the redactor runs over every blob at ingest).
  line windows     CPU seconds over the same corpora of the shipped redactor (line-bounded rules
                   run only over the lines holding their keywords, worker/repos/secrets/keyword_lines.py)
                   and of the whole-text run of every rule (the reference), each freshly built
                   (cold RE2 caches, as in a new blob worker) then again (warm); the speed-up; and
                   how many texts the two redact differently (must be 0).
The "without" redactor is built in the same run from the same code, without gitleaks' rules.
With --profile it prints only the CPU seconds per rule kind over the standard library (warm
caches), whole text and line windows, the costliest first, and the cost of finding the windows.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.secret_corpus import CONTEXTS, all_contexts, formats, samples  # noqa: E402
from worker.repos.secrets.gitleaks_rules import gitleaks_rules  # noqa: E402
from worker.repos.secrets.redaction import Redactor, plugin_rules  # noqa: E402
from worker.repos.secrets.secret_rules import OWN_RULES  # noqa: E402

_MAX_FILE = 2_000_000  # the ingest bound on text files is lower; no file here is larger


def coverage(redactor: Redactor) -> tuple[dict[str, tuple[int, int, list[str]]], list[tuple[str, bool]]]:
    """Per context: (redacted, applicable, missed families); and per format: (name, redacted)."""
    table: dict[str, tuple[int, int, list[str]]] = {}
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    missed: dict[str, list[str]] = collections.defaultdict(list)
    for sample in samples():
        for where, text in all_contexts(sample):
            counts[where][1] += 1
            if sample.leaked(redactor.redact(text)):
                missed[where].append(sample.family)
            else:
                counts[where][0] += 1
    for where in CONTEXTS:
        table[where] = (counts[where][0], counts[where][1], missed[where])
    documents = []
    for name, document, secrets in formats():
        out = redactor.redact(document)
        documents.append((name, not any(s[i : i + 8] in out for s in secrets for i in range(len(s) - 7))))
    return table, documents


def repo_files() -> list[bytes]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return _texts(ROOT / name for name in names.decode().split("\0") if name)


def stdlib_files() -> list[bytes]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return _texts(p for p in sorted(stdlib.rglob("*.py")) if "site-packages" not in p.parts)


def _texts(paths: object) -> list[bytes]:
    found = []
    for path in paths:  # type: ignore[attr-defined]
        if not path.is_file() or path.stat().st_size > _MAX_FILE:
            continue
        data = path.read_bytes()
        if b"\0" not in data[:8192]:
            found.append(data)
    return found


def scan(redactor: Redactor, corpus: list[bytes]) -> tuple[collections.Counter[str], float]:
    """Redactions by kind, and MB/s."""
    kinds: collections.Counter[str] = collections.Counter()
    started = time.perf_counter()
    for data in corpus:
        kinds.update(redactor.redact_bytes(data).kinds)
    elapsed = time.perf_counter() - started
    return kinds, sum(map(len, corpus)) / 1e6 / elapsed


def _cpu_seconds(redactor: Redactor, corpus: list[bytes]) -> float:
    started = time.process_time()  # CPU time: the machine is shared, wall time is not ours
    for data in corpus:
        redactor.redact_bytes(data)
    return time.process_time() - started


def line_windows(corpora: dict[str, list[bytes]]) -> None:
    """The line windows against the whole-text run, built in the same run from the same rules."""
    print(
        "\n| corpus | whole text: CPU s cold / warm | line windows: CPU s cold / warm "
        "| speed-up cold / warm | texts redacted differently |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, corpus in corpora.items():
        whole, windowed = Redactor(by_lines=False), Redactor()
        old = [_cpu_seconds(whole, corpus) for _ in range(2)]
        new = [_cpu_seconds(windowed, corpus) for _ in range(2)]
        differing = sum(whole.redact_bytes(data) != windowed.redact_bytes(data) for data in corpus)
        print(
            f"| {name} | {old[0]:.2f} / {old[1]:.2f} | {new[0]:.2f} / {new[1]:.2f} "
            f"| {old[0] / new[0]:.2f}× / {old[1] / new[1]:.2f}× | {differing} |"
        )


def _rule_costs(redactor: Redactor, corpus: list[bytes]) -> collections.Counter[str]:
    """CPU seconds per rule kind: what `redact_bytes` does per rule, timed rule by rule."""
    costs: collections.Counter[str] = collections.Counter()
    for data in corpus:
        present = {redactor._keywords[i] for i in (redactor._keyword_set.Match(data) or ())}
        windows: dict[int, list[tuple[int, int]]] = {}
        for rule in redactor._compiled:
            if rule.keywords and present.isdisjoint(rule.keywords):
                continue
            started = time.process_time()
            if rule.lines is None:
                redactor._matches(rule, data)
            else:
                if id(rule.lines) not in windows:
                    windows[id(rule.lines)] = rule.lines.windows(data)
                    costs["(finding line windows)"] += time.process_time() - started
                    started = time.process_time()
                redactor._matches(rule, data, windows[id(rule.lines)])
            costs[rule.kind[len(b"[REDACTED:") : -1].decode()] += time.process_time() - started
    return costs


def rule_profile(corpus: list[bytes], top: int = 8) -> None:
    whole, windowed = Redactor(by_lines=False), Redactor()
    for redactor in (whole, windowed):
        _cpu_seconds(redactor, corpus)  # warm the DFA caches
    old, new = _rule_costs(whole, corpus), _rule_costs(windowed, corpus)
    print(f"CPU s per rule kind, {len(corpus)} files, {sum(map(len, corpus)) / 1e6:.1f} MB (warm)\n")
    print("| rule kind | whole text | line windows |\n|---|---:|---:|")
    for kind, _ in (old + new).most_common(top):
        print(f"| {kind} | {old[kind]:.3f} | {new[kind]:.3f} |")
    print(f"| all rules | {sum(old.values()):.3f} | {sum(new.values()):.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-stdlib", action="store_true", help="skip the standard library corpus")
    parser.add_argument("--profile", action="store_true", help="only the CPU per rule kind (stdlib)")
    args = parser.parse_args()
    if args.profile:
        rule_profile(stdlib_files())
        return
    now = Redactor()
    before = Redactor((*OWN_RULES, *plugin_rules()[0]))  # the same engine without gitleaks' rules
    print(
        f"rules: {len(now.rules)} ({len(gitleaks_rules())} from gitleaks; {len(before.rules)} without them)\n"
    )
    print("| context | families redacted | share | missed |\n|---|---:|---:|---|")
    table, documents = coverage(now)
    for where, (ok, total, missed) in table.items():
        print(f"| {where} | {ok}/{total} | {ok / total:.1%} | {', '.join(missed) or '-'} |")
    print("\n| document | redacted |\n|---|---|")
    for name, ok in documents:
        print(f"| {name} | {'yes' if ok else 'NO'} |")
    corpora = {"this repository": repo_files()}
    if not args.no_stdlib:
        corpora["Python stdlib"] = stdlib_files()
    print(
        "\n| corpus | files | MB | redactions without gitleaks | with | MB/s without | MB/s with | with/without |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    details = {}
    for name, corpus in corpora.items():
        scan(now, corpus[:50])  # warm up both (DFA caches)
        scan(before, corpus[:50])
        old_kinds, old_speed = scan(before, corpus)
        new_kinds, new_speed = scan(now, corpus)
        details[name] = new_kinds
        megabytes = sum(map(len, corpus)) / 1e6
        print(
            f"| {name} | {len(corpus)} | {megabytes:.1f} | {sum(old_kinds.values())} | {sum(new_kinds.values())} "
            f"| {old_speed:.1f} | {new_speed:.1f} | {new_speed / old_speed:.2f} |"
        )
    for name, kinds in details.items():
        print(
            f"\nredactions now in {name}, by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common())
        )
    line_windows(corpora)


if __name__ == "__main__":
    main()
