"""A real PostgreSQL server from Debian's packages (`apt-get install postgresql`), in a temporary
directory, on a free loopback port, for the history's tests against PostgreSQL.

PostgreSQL refuses to run as root: when the tests run as root, initdb and the server run as the
`postgres` user the package created (through runuser). Without the binaries, or as root without
that user, `postgres_url` skips with the reason.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.redis_servers import free_port


def _binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def _as_server_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and no `postgres` user to run PostgreSQL as")
    return ["runuser", "-u", "postgres", "--"]


@contextmanager
def postgres_url() -> Iterator[str]:
    """A fresh server with an empty database `history`; its URL (stopped and removed on exit)."""
    binaries = _binaries()
    if binaries is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    prefix = _as_server_user()
    directory = Path(tempfile.mkdtemp(prefix="codebot-pg-"))  # not under pytest's 0700 root tmp
    directory.chmod(0o755)
    if prefix:
        shutil.chown(directory, "postgres", "postgres")
    data, port = directory / "data", free_port()
    run = [*prefix, str(binaries / "pg_ctl")]
    try:
        subprocess.run([*prefix, str(binaries / "initdb"), "-D", str(data), "-U", "codebot", "-A", "trust"],
                       check=True, capture_output=True)  # fmt: skip
        options = f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run([*run, "-D", str(data), "-o", options, "-l", str(directory / "log"), "-w", "start"],
                       check=True, capture_output=True)  # fmt: skip
        subprocess.run([*prefix, str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "codebot", "history"],
                       check=True, capture_output=True)  # fmt: skip
        yield f"postgresql://codebot@127.0.0.1:{port}/history"
    finally:
        subprocess.run([*run, "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(directory, ignore_errors=True)
