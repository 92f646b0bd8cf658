"""Operations: metrics, structured logs, status, token and cost accounting, the daily budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from config.errors import ConfigError
from tests.support.e2e import Rig, build_rig
from tests.support.metrics import metric_value, samples
from tests.support.model_server import ScriptedModel, text, tool_calls
from tests.support.slack_rig import SlackRig, build_slack_rig
from worker.jobs.queue import queue_depth
from worker.ops.accounting import record_usage, usage_of_day, usage_of_user
from worker.ops.metrics import serve_metrics

pytestmark = pytest.mark.rig(model_input_usd_per_million_tokens=2.0, model_output_usd_per_million_tokens=8.0)


def answer_one(rig: Rig) -> None:
    rig.model.enqueue(
        tool_calls(
            ("search", {"pattern": "retry"}), ("read_file", {"repo": "payments", "path": "README.md"})
        ),
        text("It retries [payments:README.md#L1]."),
    )
    _, events = rig.ask("how does retry work?")
    assert rig.final(events)[0] == "answer"


def test_metrics_endpoint_counts_questions_tool_calls_tokens_and_latency(rig: Rig) -> None:
    answer_one(rig)
    server = serve_metrics(rig.redis, 0, queue_depth, host="127.0.0.1")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            body = response.read().decode()
            assert response.headers["Content-Type"].startswith("text/plain")
    finally:
        server.shutdown()
    found = samples(body)
    assert metric_value(found, 'codebot_questions_total{platform="console",status="answered"}') == 1
    assert metric_value(found, 'codebot_tool_calls_total{tool="search"}') == 1
    assert metric_value(found, 'codebot_tool_calls_total{tool="read_file"}') == 1
    assert metric_value(found, "codebot_tokens_total") > 0
    assert metric_value(found, "codebot_question_seconds_count") == 1
    assert metric_value(found, "codebot_queue_depth") == 0
    assert "# TYPE codebot_question_seconds histogram" in body


def test_tokens_and_cost_are_accounted_per_user_and_per_day(rig: Rig) -> None:
    answer_one(rig)
    answer_one(rig)
    day, user = usage_of_day(rig.redis), usage_of_user(rig.redis, "console:tester")
    sent_prompt = sum(rig.model.tokens_of(r) for r in rig.model.requests)  # what the server counted
    assert day.questions == 2 and user.questions == 2
    assert day.prompt_tokens == sent_prompt
    expected = (day.prompt_tokens * 2.0 + day.completion_tokens * 8.0) / 1_000_000
    assert day.cost_usd == pytest.approx(expected, abs=1e-6)
    assert usage_of_user(rig.redis, "slack:U999").questions == 0


def test_a_spent_daily_budget_is_answered_politely_without_calling_the_model(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, daily_token_budget=1000):
        record_usage(rig.redis, rig.settings, "console:someone", 900, 200)
        _, events = rig.ask("how does retry work?")
        kind, fields = rig.final(events)
        assert kind == "failed" and "budget is used up" in fields["text"]
        assert rig.model.requests == []


def test_a_spent_budget_is_told_in_the_slack_thread_and_nothing_is_enqueued(tmp_path: Path) -> None:
    for slack in build_slack_rig(tmp_path, daily_token_budget=10):
        record_usage(slack.redis, slack.settings, "slack:U0", 10, 0)
        check_budget_refusal(slack)


def check_budget_refusal(slack: SlackRig) -> None:
    slack.mention("how does retry work?")
    slack.settle()
    assert slack.question_jobs() == []
    posted = " ".join(str(call.body.get("text", "")) for call in slack.api.calls_to("chat.postMessage"))
    assert "budget is used up" in posted


def test_json_logs_carry_the_question_facts_but_never_its_text_or_code(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path):
        with ScriptedModel() as model:
            model.enqueue(
                tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"})),
                text("Backoff [payments:payments/retry.py#L12]."),
            )
            env = {
                **os.environ,
                "CODEBOT_DATA_DIR": str(rig.settings.data_dir),
                "CODEBOT_REPOS_FILE": str(rig.settings.repos_file),
                "OPENAI_BASE_URL": model.base_url,
                "OPENAI_API_KEY": "k",
                "CODEBOT_LOG_FORMAT": "json",
            }
            result = subprocess.run(
                [sys.executable, "-m", "codebot.cli", "ask", "how does the secret retry work?"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            )
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""  # `codebot ask` keeps log lines off the answer's screen: in its log file
        logged = (rig.settings.data_dir / "logs" / "ask.log").read_text()
        entries = [json.loads(line) for line in logged.splitlines() if line.startswith("{")]
        answered = next(e for e in entries if e["msg"] == "question answered")
        assert answered["platform"] == "console" and answered["tool_calls"] == 1
        assert answered["tools"] == {"read_file": 1} and answered["prompt_tokens"] > 0
        assert {"job_id", "ref", "channel", "repos", "seconds"} <= answered.keys()
        assert "secret retry" not in logged and "backoff * 2**attempt" not in logged


def test_status_in_the_terminal_shows_queue_workers_refreshes_and_usage(rig: Rig) -> None:
    answer_one(rig)
    env = {
        **os.environ,
        "CODEBOT_DATA_DIR": str(rig.settings.data_dir),
        "CODEBOT_REPOS_FILE": str(rig.settings.repos_file),
    }
    result = subprocess.run(
        [sys.executable, "-m", "codebot.cli", "status"], capture_output=True, text=True, env=env, timeout=110
    )
    assert result.returncode == 0, result.stderr
    assert "Queue" in result.stdout or "queue" in result.stdout
    assert "payments" in result.stdout
    assert "today (UTC): 1 question, " in result.stdout and "cost unknown" in result.stdout


def test_a_metrics_port_already_taken_is_named_in_one_line(rig: Rig) -> None:
    first = serve_metrics(rig.redis, 0, queue_depth, host="127.0.0.1")
    try:
        with pytest.raises(
            ConfigError, match=r"^CODEBOT_METRICS_PORT: cannot serve /metrics on 127\.0\.0\.1:\d+ \("
        ):
            serve_metrics(rig.redis, first.server_address[1], queue_depth, host="127.0.0.1")
    finally:
        first.shutdown()
