"""The deployment files (Dockerfile, deploy/compose.yaml, deploy/systemd, deploy/grafana,
deploy/prometheus) checked for what cannot be run here: every role's command line parses,
every variable they set is a setting codebot knows, every metric they query is exported.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import tomllib
from configparser import ConfigParser
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.web.auth import Gate
from codebot.cli_parser import build_parser as _parser
from config.settings import Settings
from worker.ops.metrics import COUNTER_LABELS, HELP

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
NOT_OURS = {"PATH", "PYTHONUNBUFFERED"}  # the image's own environment, not codebot settings
HISTOGRAMS = {"codebot_question_seconds"}


def known_variables() -> set[str]:
    names = set()
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        choices = getattr(alias, "choices", None)
        names.update(choices if choices else [f"CODEBOT_{field.upper()}"])
    return names


def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))


def unit(path: Path) -> ConfigParser:
    parser = ConfigParser(strict=False, interpolation=None, comment_prefixes=("#",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text(encoding="utf-8"))
    return parser


def role_command_lines() -> dict[str, list[str]]:
    """Every `codebot ...` command line the files run, by where it is written."""
    lines: dict[str, list[str]] = {}
    for entry in (ROOT / "Procfile").read_text(encoding="utf-8").splitlines():
        role, _, command = entry.partition(":")
        lines[f"Procfile {role}"] = shlex.split(command)[1:]
    for name, service in compose()["services"].items():
        if name != "redis":
            lines[f"compose {name}"] = service["command"]
    for path in UNITS:
        lines[path.name] = shlex.split(unit(path)["Service"]["ExecStart"])[1:]
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    lines["Dockerfile CMD"] = json.loads(re.search(r"^CMD (.+)$", dockerfile, re.M).group(1))  # type: ignore[union-attr]
    return lines


def test_every_role_in_every_file_is_a_command_line_codebot_accepts() -> None:
    lines = role_command_lines()
    assert {
        "compose slack",
        "compose worker",
        "compose web",
        "compose webhooks",
        "compose history",
        "Dockerfile CMD",
    } <= lines.keys()
    assert {"Procfile webhooks"} <= lines.keys()
    roles = ("worker", "slack", "discord", "web", "webhooks", "history")
    assert {p.name for p in UNITS} == {f"codebot-{r}.service" for r in roles}
    for where, argv in lines.items():
        try:
            _parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"{where}: `codebot {' '.join(argv)}` is not a command line codebot accepts")


def test_every_variable_the_files_set_is_a_known_setting() -> None:
    known = known_variables() | NOT_OURS
    found: dict[str, str] = {}
    for name, service in compose()["services"].items():
        if name != "redis":
            found.update({variable: f"compose {name}" for variable in service.get("environment", {})})
    for path in UNITS:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("Environment="):
                found[line.removeprefix("Environment=").partition("=")[0]] = path.name
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    env_block = re.search(r"^ENV (.+?)(?:\n\n|\nUSER)", dockerfile, re.M | re.S).group(1)  # type: ignore[union-attr]
    found.update({name: "Dockerfile" for name in re.findall(r"([A-Z_]+)=", env_block)})
    for line in (DEPLOY / "codebot.env.example").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            found[line.partition("=")[0]] = "codebot.env.example"
    assert len(found) > 10
    assert {name: where for name, where in found.items() if name not in known} == {}


def queries() -> list[str]:
    """Every PromQL expression of the alert rules and the dashboard."""
    alerts = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text(encoding="utf-8"))
    exprs = [rule["expr"] for group in alerts["groups"] for rule in group["rules"]]
    dashboard = json.loads((DEPLOY / "grafana" / "codebot.json").read_text(encoding="utf-8"))
    return exprs + [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def exported_labels() -> dict[str, set[str]]:
    """What the code exports: metric name -> its labels (worker/ops/metrics.py)."""
    exported = {name: set(COUNTER_LABELS.get(name, [])) for name in HELP}
    for name in HISTOGRAMS:
        exported.update({f"{name}_bucket": {"le"}, f"{name}_sum": set(), f"{name}_count": set()})
    return exported


def test_the_dashboard_and_alert_rules_query_only_metrics_and_labels_codebot_exports() -> None:
    exported, used = exported_labels(), set()
    for expr in queries():
        in_expr = re.findall(r"\b(codebot_[a-z_]+)(\{[^}]*\})?", expr)
        assert in_expr, expr
        for name, selector in in_expr:
            used.add(name)
            assert name in exported, f"{name} is not exported: {expr}"
            assert set(re.findall(r"(\w+)\s*=", selector)) <= exported[name], expr
        grouped = {
            label for group in re.findall(r"by \(([^)]*)\)", expr) for label in re.split(r"\s*,\s*", group)
        }
        assert grouped <= set().union(*(exported[name] for name, _ in in_expr)), expr
    assert len(used) >= 8


def test_the_alert_rules_pass_promtool_or_at_least_their_shape() -> None:
    rules = DEPLOY / "prometheus" / "alerts.yml"
    promtool = shutil.which("promtool")
    if promtool:
        result = subprocess.run(
            [promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "SUCCESS: 7 rules found" in result.stdout
    groups = yaml.safe_load(rules.read_text(encoding="utf-8"))["groups"]
    for rule in groups[0]["rules"]:
        assert {"alert", "expr", "labels", "annotations"} <= rule.keys(), rule
        assert rule["labels"]["severity"] in ("info", "warning", "critical")


def test_the_image_runs_as_a_user_and_packages_what_pyproject_packages() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    users = re.findall(r"^USER (\S+)", dockerfile, re.M)
    assert users and users[-1] not in ("root", "0")
    assert re.search(r'^ENTRYPOINT \[.*"codebot"\]', dockerfile, re.M)
    copied = set(re.findall(r"^COPY (\w+) \./\1$", dockerfile, re.M))
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"][
        "include"
    ]
    assert copied == {name.rstrip("*") for name in packages}


def test_compose_keeps_redis_append_only_and_runs_adapter_worker_web_webhooks_and_recorder_against_it() -> (
    None
):
    services = compose()["services"]
    assert {"redis", "slack", "worker", "web", "webhooks", "history"} <= services.keys()
    assert services["redis"]["command"][services["redis"]["command"].index("--appendonly") + 1] == "yes"
    for name in ("slack", "worker", "web", "webhooks", "history"):
        assert services[name]["environment"]["REDIS_URL"] == "redis://redis:6379/0"
    published = [port for service in services.values() for port in service.get("ports", [])]
    assert published and all(port.startswith("127.0.0.1:") for port in published)


def test_compose_puts_the_console_on_a_network_of_its_own_and_trusts_only_its_gateway() -> None:
    config = compose()
    web = config["services"]["web"]
    address = web["networks"]["console"]["ipv4_address"]
    assert list(web["networks"]) == ["console"] and "console" in config["services"]["redis"]["networks"]
    assert all("console" not in config["services"][name].get("networks", []) for name in ("slack", "worker"))
    assert web["command"][web["command"].index("--host") + 1] == address  # not 0.0.0.0
    (subnet,) = config["networks"]["console"]["ipam"]["config"]
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        web_trusted_proxies=json.loads(web["environment"]["CODEBOT_WEB_TRUSTED_PROXIES"]),
        web_allowed_hosts=json.loads(web["environment"]["CODEBOT_WEB_ALLOWED_HOSTS"]),
        web_proxy_user_header="X-Forwarded-User",
    )
    assert settings.web_trusted_proxies == (subnet["gateway"],)
    assert Gate(settings).is_trusted_proxy(subnet["gateway"]) and not Gate(settings).is_trusted_proxy(address)


def test_every_systemd_unit_runs_as_codebot_with_its_settings_file() -> None:
    for path in UNITS:
        service = unit(path)["Service"]
        assert service["User"] == "codebot", path.name
        assert service["ExecStart"].startswith("/opt/codebot/bin/codebot "), path.name
        assert service["EnvironmentFile"] == "/etc/codebot/codebot.env", path.name
        assert unit(path)["Install"]["WantedBy"] == "multi-user.target"
    assert unit(DEPLOY / "systemd" / "codebot-worker.service")["Service"]["KillMode"] == "mixed"


def test_the_license_is_apache_2_and_pyproject_says_so() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert (
        "Apache License" in (ROOT / "LICENSE").read_text()
        and "Version 2.0, January 2004" in (ROOT / "LICENSE").read_text()
    )


def test_the_console_templates_are_package_data_so_an_installed_image_has_them() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    templates = [p.relative_to(ROOT / "bot" / "web") for p in (ROOT / "bot" / "web" / "templates").iterdir()]
    assert templates and all(any(t.match(pattern) for pattern in data["bot.web"]) for t in templates)


def mounted_data_dir(service: dict[str, Any]) -> str:
    """What is mounted at the service's CODEBOT_DATA_DIR (a volume's name, or a host path)."""
    path = service["environment"]["CODEBOT_DATA_DIR"]
    [source] = [v.split(":")[0] for v in service.get("volumes", []) if v.split(":")[1:2] == [path]]
    return str(source)


def test_the_console_reads_the_history_database_the_recorder_writes() -> None:
    services = compose()["services"]
    assert services["history"]["command"] == ["history", "record"]
    assert mounted_data_dir(services["web"]) == mounted_data_dir(services["history"])
    recorder = DEPLOY / "systemd" / "codebot-history.service"
    assert unit(recorder)["Service"]["ExecStart"] == "/opt/codebot/bin/codebot history record"
    for name in ("history", "web", "worker"):  # on one machine, one data dir: the SQLite history's
        environment = [
            line.partition("=")[2]
            for line in (DEPLOY / "systemd" / f"codebot-{name}.service")
            .read_text(encoding="utf-8")
            .splitlines()
            if line.startswith("Environment=")
        ]
        assert "CODEBOT_DATA_DIR=/var/lib/codebot" in environment, name
