"""The deployment runs as documented (docs/operations.md, "Containers" and "Hardening the units"):
every compose role reads the same repos file and has a healthcheck on its own port, the image
installs its dependencies before its code and probes its role's health, and every systemd unit
is rated OK by `systemd-analyze security` while still allowing what its role does.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from redis import Redis

from tests.support.e2e import Rig
from tests.support.redis_servers import free_port, redis_server, wait_until
from worker.jobs.queue import queue_depth
from worker.jobs.tool_threads import unhealthy_reason
from worker.ops.metrics import serve_metrics

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
PROBE = DEPLOY / "healthcheck.py"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
CODE = ("codebot", "bot", "worker", "config")  # the packages the image installs
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def codebot_services() -> dict[str, dict[str, Any]]:
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))["services"]
    return {name: service for name, service in services.items() if service.get("command") and name != "redis"}


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_every_codebot_service_in_compose_reads_the_same_repos_file() -> None:
    services = codebot_services()
    assert {"slack", "worker", "web", "webhooks"} <= services.keys()
    mounted = {}
    for name, service in services.items():
        path = service.get("environment", {}).get("CODEBOT_REPOS_FILE")
        assert path, f"{name} scopes questions against the packaged repos list, not yours"
        sources = [v.split(":")[0] for v in service.get("volumes", []) if v.split(":")[1:2] == [path]]
        assert len(sources) == 1, f"{name}: nothing is mounted at {path}"
        mounted[name] = (sources[0], path)
    assert len(set(mounted.values())) == 1, mounted


def test_every_compose_service_has_a_healthcheck_on_the_port_its_role_listens_on() -> None:
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))["services"]
    assert services["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    for name, service in codebot_services().items():
        test = service.get("healthcheck", {}).get("test")
        assert test and test[:2] == ["CMD", "codebot-healthcheck"], f"{name} has no healthcheck"
        url = urlsplit(test[2])
        command, environment = service["command"], service.get("environment", {})
        ports = {option(command, "--port"), environment.get("CODEBOT_METRICS_PORT")} - {None}
        assert str(url.port) in ports, f"{name}: the healthcheck asks port {url.port}, it listens on {ports}"
        host = option(command, "--host") if str(url.port) == option(command, "--port") else None
        host = host or environment.get("CODEBOT_METRICS_HOST", "127.0.0.1")
        assert url.hostname == host or (host == "0.0.0.0" and url.hostname in LOOPBACK), (name, host)
        assert url.path == "/health"


def probe(*url: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """deploy/healthcheck.py as the image runs it (`codebot-healthcheck [URL]`), in `environment`."""
    return subprocess.run(
        [sys.executable, str(PROBE), *url],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], **environment},
        timeout=60,
    )


def test_the_image_probe_passes_a_healthy_worker_and_fails_one_that_lost_redis(rig: Rig) -> None:
    healthy = serve_metrics(rig.redis, 0, queue_depth, health=unhealthy_reason)
    lost = serve_metrics(Redis(port=1, socket_connect_timeout=1), 0, queue_depth, health=unhealthy_reason)
    try:
        # The image's HEALTHCHECK gives no URL: the metrics port from the role's environment.
        passed = probe(CODEBOT_METRICS_PORT=str(healthy.server_address[1]), CODEBOT_METRICS_HOST="0.0.0.0")
        failed = probe(f"http://127.0.0.1:{lost.server_address[1]}/health")
    finally:
        for server in (healthy, lost):
            server.shutdown()
            server.server_close()
    assert passed.returncode == 0 and "200 ok" in passed.stdout, passed.stdout + passed.stderr
    assert failed.returncode == 1 and "503 unhealthy: redis unreachable" in failed.stdout, failed.stdout


def test_the_probe_passes_a_role_without_a_health_port_and_fails_a_port_nobody_answers() -> None:
    silent = probe("http://127.0.0.1:1/health")  # nothing listens on port 1
    assert silent.returncode == 1 and "ConnectionRefusedError" in silent.stdout, silent.stdout + silent.stderr
    unknown = probe()  # no URL, no CODEBOT_METRICS_PORT: `codebot web` or `codebot mcp` run by hand
    assert unknown.returncode == 0 and "no health endpoint to check" in unknown.stdout


@pytest.mark.timeout(300)  # a recorder process starting at load 16 on 2 cores
def test_the_recorders_healthcheck_passes_while_it_records_and_fails_once_its_redis_is_gone(
    tmp_path: Path,
) -> None:
    port = free_port()
    with redis_server(tmp_path) as server:
        env = {**os.environ, "REDIS_URL": server.url, "CODEBOT_DATA_DIR": str(tmp_path / "data")}
        env.update(CODEBOT_METRICS_PORT=str(port), CODEBOT_METRICS_HOST="0.0.0.0")
        command = [sys.executable, "-m", "codebot.cli", "history", "record"]
        recorder = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_until(
                lambda: probe(CODEBOT_METRICS_PORT=str(port)).returncode == 0, 120, "the recorder's /health"
            )
            server.stop()
            failed = probe(f"http://127.0.0.1:{port}/health")
        finally:
            recorder.terminate()
            recorder.wait(30)
    assert failed.returncode == 1, failed.stdout  # 503 "redis unreachable", or the recorder gone with it


@contextmanager
def console(rig: Rig, host: str) -> Iterator[str]:
    """`codebot web --host HOST` as compose runs it (on its own address); yields its base URL."""
    env = {**os.environ, "CODEBOT_DATA_DIR": str(rig.settings.data_dir), "CODEBOT_WEB_TOKEN": "t" * 32}
    process = subprocess.Popen(
        [sys.executable, "-m", "codebot.cli", "web", "--host", host, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # printed once it listens
        base = re.search(rf"http://{re.escape(host)}:\d+", line)
        assert base, line + (process.stderr.read() if process.poll() is not None and process.stderr else "")
        yield base[0]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def test_the_consoles_healthcheck_at_its_own_address_passes_its_host_check(rig: Rig) -> None:
    web = codebot_services()["web"]
    assert urlsplit(web["healthcheck"]["test"][2]).hostname == option(web["command"], "--host")
    with console(rig, "127.0.0.3") as base:  # like compose's 172.30.80.10: not 127.0.0.1
        answered = probe(f"{base}/health")
    assert answered.returncode == 0 and "200 ok" in answered.stdout, answered.stdout + answered.stderr


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments left out."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [(line.split()[0].upper(), line.split(None, 1)[1]) for line in joined.splitlines() if line.strip()]


def test_the_image_installs_its_dependencies_before_it_copies_its_code() -> None:
    steps = dockerfile_instructions()
    final = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    installs = [i for i, (op, args) in enumerate(steps) if op == "RUN" and "pip install" in args]
    code = [i for i, (op, args) in enumerate(steps) if op == "COPY" and args.split()[0] in CODE]
    dependencies, package = installs[0], installs[-1]
    assert final < dependencies < min(code) < max(code) < package, steps
    assert "-r /tmp/requirements.txt" in steps[dependencies][1] and "--no-deps" in steps[package][1]
    # The list the dependency layer installs is pyproject.toml's, generated by the build itself.
    (generate,) = [args for op, args in steps[:final] if op == "RUN" and "tomllib" in args]
    program = shlex.split(generate)[shlex.split(generate).index("-c") + 1]
    listed = subprocess.run(
        [sys.executable, "-c", program], input=(ROOT / "pyproject.toml").read_bytes(), capture_output=True
    ).stdout.decode()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert listed.splitlines() == pyproject["project"]["dependencies"] + pyproject["build-system"]["requires"]


def test_the_image_has_a_healthcheck_that_runs_the_probe_it_installs() -> None:
    steps = dockerfile_instructions()
    (healthcheck,) = [args for op, args in steps if op == "HEALTHCHECK"]
    command = re.search(r"CMD (\[.*\])", healthcheck)
    assert command and yaml.safe_load(command[1]) == ["codebot-healthcheck"], healthcheck
    assert ("COPY", "deploy/healthcheck.py /usr/local/bin/codebot-healthcheck") in steps
    assert re.search(r"--start-period=\d+s", healthcheck), "a role still starting would count as failing"


def unit_directives(path: Path) -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            values.setdefault(key, []).append(value)
    return values


def syscalls(filter_value: str) -> set[str]:
    """The system calls a SystemCallFilter= value names, its groups expanded by systemd itself."""
    names: set[str] = set()
    for item in filter_value.split():
        if not item.startswith("@"):
            names.add(item)
            continue
        listed = subprocess.run(["systemd-analyze", "syscall-filter", item], capture_output=True, text=True)
        for line in listed.stdout.splitlines()[1:]:
            entry = line.strip()
            if entry and not entry.startswith("#"):
                names |= syscalls(entry)
    return names


# What each role is seen to do (strace of the test suite's roles): fork and exec git and ripgrep
# in sessions of their own and kill them, wait for them, listen and connect over TCP and Unix
# sockets, bound a blob processor's memory (setrlimit is prlimit64); the Slack adapter's intake
# lowers its own priority (setpriority).
PROCESSES = {"clone", "clone3", "execve", "setsid", "kill", "wait4", "prlimit64"}
NEEDED = PROCESSES | {"socket", "bind", "listen", "accept4", "connect"}
NEEDED_BY = {"codebot-slack.service": {"setpriority"}}


def security_score(path: Path) -> float:
    result = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if "--offline" in result.stderr and result.returncode != 0:
        pytest.skip(f"this systemd-analyze has no --offline (systemd < 250): {result.stderr.strip()}")
    level = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert level, result.stdout + result.stderr
    return float(level[1])


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed here")
def test_every_systemd_unit_is_rated_ok_and_still_allows_what_its_role_does() -> None:
    assert len(UNITS) == 6
    for path in UNITS:
        assert security_score(path) <= 4.0, f"{path.name}: systemd-analyze security rates it above 4.0"
        directives = unit_directives(path)
        filters = directives["SystemCallFilter"]  # the allow-list, then what is taken out of it
        assert not filters[0].startswith("~") and all(f.startswith("~") for f in filters[1:]), path.name
        allowed = syscalls(filters[0]) - set().union(*(syscalls(f[1:]) for f in filters[1:]))
        assert NEEDED | NEEDED_BY.get(path.name, set()) <= allowed, path.name
        assert set(directives["RestrictAddressFamilies"][0].split()) == {"AF_INET", "AF_INET6", "AF_UNIX"}
        assert directives["ReadWritePaths"] == ["/var/lib/codebot"] and "PrivateNetwork" not in directives
        assert "IPAddressDeny" not in directives, "the model endpoint, Slack and git remotes are anywhere"
