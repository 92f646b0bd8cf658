"""What the config-value rules (worker/repos/secrets/config_values.py) withhold in third-party files.

    .venv/bin/python bench/config_values.py [ROOT ...]

Default roots: this interpreter's site-packages, /usr/lib, /usr/share and /etc (the real
third-party configuration files on the machine: none holds a secret of ours, so every value
withheld is either a false positive or test data shipped by a library). Prints:

  files            config-named files (.json .yaml .yml .toml .ini .cfg .conf .properties .env)
                   scanned, by extension, and how many the rules judge to be config files;
  withheld         values withheld, by rule (secret-named key / high entropy), distinct values,
                   and the files holding them, most first;
  sample           every distinct (rule, key, value) withheld, the value cut to 6 characters;
  code             code files (.py .js .ts .go .rb .java .c .h .sh) under the same roots judged
                   to be config files, and the values withheld in them (code keeps today's rules);
  cost             CPU seconds of judging every file, and the machine's load average.
"""

from __future__ import annotations

import collections
import os
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.repos.secrets.config_values import ConfigValues  # noqa: E402

CONFIG_SUFFIXES = (".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".properties", ".env")
CODE_SUFFIXES = (".py", ".js", ".ts", ".go", ".rb", ".java", ".c", ".h", ".sh")
_MAX_FILE = 2_000_000


def files(roots: list[str], suffixes: tuple[str, ...]) -> list[Path]:
    found = []
    for root in roots:
        for folder, _dirs, names in os.walk(root):
            for name in names:
                path = Path(folder, name)
                if name.endswith(suffixes) and not path.is_symlink():
                    try:
                        if path.stat().st_size <= _MAX_FILE:
                            found.append(path)
                    except OSError:
                        continue
    return sorted(found)


def _line_of(data: bytes, start: int, end: int) -> tuple[str, str]:
    """The key part of the line holding a withheld value, and the value cut short."""
    line_start = data.rfind(b"\n", 0, start) + 1
    key = data[line_start:start].decode("utf-8", "replace").strip()[-60:]
    value = data[start:end].decode("utf-8", "replace")
    return key, (value[:6] + "…") if len(value) > 6 else value


def main() -> None:
    roots = sys.argv[1:] or [sysconfig.get_paths()["purelib"], "/usr/lib", "/usr/share", "/etc"]
    judge = ConfigValues()
    scanned: collections.Counter[str] = collections.Counter()
    judged: collections.Counter[str] = collections.Counter()
    by_rule: collections.Counter[str] = collections.Counter()
    by_file: collections.Counter[str] = collections.Counter()
    distinct: collections.Counter[tuple[str, str, str]] = collections.Counter()
    cpu = 0.0
    for path in files(roots, CONFIG_SUFFIXES):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"\x00" in data:
            continue
        scanned[path.suffix] += 1
        started = time.process_time()
        kind, spans = judge.judge(data)
        cpu += time.process_time() - started
        if kind:
            judged[path.suffix] += 1
        for start, end, marker in spans:
            rule = marker.decode()[len("[REDACTED:") : -1]
            by_rule[rule] += 1
            by_file[str(path)] += 1
            distinct[(rule, *_line_of(data, start, end))] += 1
    print(f"roots: {' '.join(roots)}")
    print(f"files: {sum(scanned.values())} scanned, {sum(judged.values())} judged config")
    for suffix, count in sorted(scanned.items()):
        print(f"  {suffix:12} {count:6} scanned {judged[suffix]:6} config")
    print(f"withheld: {sum(by_rule.values())} values in {len(by_file)} files; {len(distinct)} distinct")
    for rule, count in by_rule.most_common():
        print(f"  {rule:22} {count}")
    print("files holding the most:")
    for name, count in by_file.most_common(15):
        print(f"  {count:5}  {name}")
    print("sample (rule, key, value cut, times):")
    for (rule, key, value), count in sorted(distinct.items()):
        print(f"  {rule:20} {key!r:62} {value!r:12} ×{count}")
    code_files = files(roots, CODE_SUFFIXES)
    code_judged = code_flagged = 0
    for path in code_files:
        try:
            kind, spans = judge.judge(path.read_bytes())
        except OSError:
            continue
        code_judged += kind is not None
        code_flagged += len(spans)
    print(f"code: {len(code_files)} files, {code_judged} judged config, {code_flagged} values withheld")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"cost: {cpu:.1f} s CPU judging the config files; load average {load} ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
