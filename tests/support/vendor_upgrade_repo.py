"""A repo whose `.env` is renamed, with a one-line edit, in the same commit as a 1,001-file vendor
upgrade (every file of vendor/lib-1.0 deleted, an edited version of it added under vendor/lib-2.0):
1,002 deleted times 1,002 added files pass git's default rename limit (1,000 squared candidate
pairs), so git left to itself pairs none of the commit's edited renames.

Commits, oldest first: `start` (README.md, .env, the vendor files), `upgrade` (the rename and the
upgrade), `later` (a README edit, so a window of 3 commits holds `upgrade` whole). Built with one
`git fast-import`, not 1,001 commits; the secret values are assembled at run time. `first_name`:
the name the settings file has in `start` (a later commit may then name its content secret)."""

from __future__ import annotations

import random
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

VENDOR_FILES = 1001
RENAMED = "config/defaults.txt"  # the .env's innocent new name


@dataclass
class VendorUpgrade:
    path: Path  # a work repo (checked out), served as the remote
    values: list[str]  # the .env's values: none may come out of any tool
    first: bytes  # the settings file's content in `start`
    shas: dict[str, str] = field(default_factory=dict)  # commit name -> sha


def _commit(name: str, day: int, files: dict[str, bytes | None]) -> bytes:
    lines = [
        b"commit refs/heads/main",
        b"author Ada <ada@example.invalid> %d +0000" % (1704110400 + day * 86400),
    ]
    lines += [lines[1].replace(b"author", b"committer"), b"data %d" % len(name), name.encode()]
    for path, content in files.items():
        if content is None:
            lines.append(b"D " + path.encode())
        else:
            lines += [b"M 100644 inline " + path.encode(), b"data %d" % len(content), content]
    return b"\n".join(lines) + b"\n\n"


def _vendor(version: str, number: int) -> bytes:
    body = f"// lib {version}, module {number}\nexport function f{number}(x) {{\n  return x * {number};\n}}\n"
    return body.encode()


def build_vendor_upgrade_repo(path: Path, first_name: str = ".env") -> VendorUpgrade:
    rng = random.Random(31)
    token = "".join(
        rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789") for _ in range(32)
    )
    values = ["envmarker" + token[:16], "dbmarker" + token[16:]]
    env = f"FAVORITE={values[0]}\nSHARED_NAME={values[1]}\nREGION=eu-west-1\n".encode()
    built = VendorUpgrade(path, values, env)
    old = {f"vendor/lib-1.0/m{n}.js": _vendor("1.0", n) for n in range(VENDOR_FILES)}
    upgraded = {f"vendor/lib-2.0/m{n}.js": _vendor("2.0", n) for n in range(VENDOR_FILES)}
    stream = _commit("start", 0, {"README.md": b"# app\n", first_name: env, **old})
    stream += _commit("upgrade", 1, {first_name: None, RENAMED: env + b"LOG_LEVEL=info\n",
                                     **dict.fromkeys(old), **upgraded})  # fmt: skip
    stream += _commit("later", 2, {"README.md": b"# app\n\nOn lib 2.0.\n"})
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input=stream, check=True)
    subprocess.run(["git", "-C", str(path), "reset", "-q", "--hard"], check=True)
    # As GitHub and GitLab serve: a windowed mirror's lineage.git is then blobless, as in production
    subprocess.run(["git", "-C", str(path), "config", "uploadpack.allowFilter", "true"], check=True)
    for name, rev in (("start", "main~2"), ("upgrade", "main~1"), ("later", "main")):
        done = subprocess.run(
            ["git", "-C", str(path), "rev-parse", rev], capture_output=True, text=True, check=True
        )
        built.shas[name] = done.stdout.strip()
    return built
