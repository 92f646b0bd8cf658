"""While a model reply is awaited the asker sees a line saying so, updated as it goes: the prompt
read so far where llama.cpp reports it, the seconds waited elsewhere, the tokens written once
they come (worker/agent/waiting.py). Real job, real Redis, the scripted model over a real socket,
held until the test has seen the lines it waits for: counted events, no clock."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from config.settings import load_settings
from tests.support.cli import CODEBOT
from tests.support.e2e import DEFAULT_FILES, Rig, build_rig
from tests.support.fixture_repos import make_repo
from tests.support.model_server import (
    Reply,
    ScriptedModel,
    answers_after_reading,
    held_before_answering,
    held_mid_stream,
    tool_calls,
)
from worker.jobs.sink import read_console_events
from worker.ops.redis_connection import stop_embedded_server

ANSWER = "It retries with backoff [payments:payments/retry.py#L1]."
LLAMA_CPP_PROPS = {"build_info": "b6000-test", "default_generation_settings": {"n_ctx": 8192}}


@pytest.fixture
def ask_env(tmp_path: Path) -> Iterator[Callable[[ScriptedModel], dict[str, str]]]:
    """The environment `codebot ask` runs in: a repo to clone, time enough, a model to name."""
    source = tmp_path / "payments-src"
    make_repo(source, DEFAULT_FILES)
    repos = tmp_path / "repos.toml"
    repos.write_text(f'[[repo]]\nname = "payments"\nurl = "{source}"\n')
    env = {
        **os.environ,
        "CODEBOT_DATA_DIR": str(tmp_path / "data"),
        "CODEBOT_REPOS_FILE": str(repos),
        "CODEBOT_MODEL_MAX_RETRIES": "0",
        "CODEBOT_QUESTION_DEADLINE_SECONDS": "600",
        "CODEBOT_MODEL_TIMEOUT_SECONDS": "600",
    }
    yield lambda model: {**env, "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "k"}
    stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))


def held_first_turn(first: Callable[[Reply], Reply]) -> Callable[[dict[str, Any]], Reply]:
    """The model of answers_after_reading, its first request answered as `first` makes it."""
    answers = answers_after_reading(ANSWER)
    asked: list[int] = []

    def reply(body: dict[str, Any]) -> Reply:
        asked.append(1)
        return first(answers(body)) if len(asked) == 1 else answers(body)

    return reply


def events_while_working(rig: Rig, on_event: Callable[[str, str], None]) -> list[str]:
    """Ask, and the kinds of the console events the job sent, `on_event` seeing each as it came
    (read on a thread of their own: the job's worker wants the main thread)."""
    question = rig.question("how does retry work?")
    rig.enqueue(question)
    kinds: list[str] = []

    def read() -> None:
        for kind, fields in read_console_events(rig.redis, question.id, 120, poll_ms=50):
            on_event(kind, str(fields.get("text", "")))
            kinds.append(kind)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    rig.work()
    reader.join(120)
    return kinds


def test_a_model_slow_to_answer_shows_a_waiting_line_that_updates_before_the_answer(tmp_path: Path) -> None:
    released = threading.Event()
    waited: list[str] = []

    def release_after_two(kind: str, text: str) -> None:
        if kind == "waiting":
            waited.append(text)
            if len(waited) == 2:
                released.set()

    for rig in build_rig(tmp_path, question_deadline_seconds=600, model_timeout_seconds=600):
        rig.model.set_handler(held_first_turn(lambda then: held_before_answering((released,), then)))
        kinds = events_while_working(rig, release_after_two)
        assert kinds.index("waiting") < kinds.index("progress") < kinds.index("answer")
        assert all(re.fullmatch(r"waiting for the model \(\d+ s\)", line) for line in waited[:2]), waited
        assert waited[0] != waited[1]  # it counts on
        assert "return_progress" not in rig.model.requests[0]  # not llama.cpp: no field it may not know


def test_llama_cpps_prompt_progress_is_shown_as_it_reads(tmp_path: Path) -> None:
    gates = (threading.Event(), threading.Event(), threading.Event())
    read: list[str] = []

    def next_step_once_shown(kind: str, text: str) -> None:
        shown = re.fullmatch(r"waiting for the model: prompt ([\d,]+) of 3,000 tokens read", text)
        if kind == "waiting" and shown and shown.group(1) not in read and len(read) < len(gates):
            read.append(shown.group(1))
            gates[len(read) - 1].set()  # the server reads a step more once this step was shown

    for rig in build_rig(
        tmp_path,
        model_options={"props": LLAMA_CPP_PROPS},
        question_deadline_seconds=600,
        model_timeout_seconds=600,
    ):
        rig.model.set_handler(held_first_turn(lambda then: held_before_answering(gates, then, reading=3000)))
        kinds = events_while_working(rig, next_step_once_shown)
        assert read == ["0", "1,000", "2,000"]
        assert kinds.index("waiting") < kinds.index("answer")
        assert rig.model.requests[0]["return_progress"] is True


def test_a_reply_being_written_shows_the_tokens_written_so_far(tmp_path: Path) -> None:
    released = threading.Event()
    lines: list[str] = []

    def release_once_writing(kind: str, text: str) -> None:
        if kind == "waiting":
            lines.append(text)
            released.set()

    for rig in build_rig(tmp_path, question_deadline_seconds=600, model_timeout_seconds=600):
        rig.model.set_handler(held_first_turn(lambda then: held_mid_stream(released, then)))
        kinds = events_while_working(rig, release_once_writing)
        assert lines[0] == "writing, 1 token"  # the tool call's first fragment came, the rest is held
        assert kinds.index("waiting") < kinds.index("progress") < kinds.index("answer")


def test_codebot_ask_prints_a_waiting_line_soon_after_sending_and_updates_it(
    tmp_path: Path, ask_env: Callable[[ScriptedModel], dict[str, str]]
) -> None:
    released = threading.Event()
    with ScriptedModel() as model:
        model.set_handler(
            held_first_turn(
                lambda _then: held_before_answering(
                    (released,), tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
                )
            )
        )
        ask = subprocess.Popen(
            [*CODEBOT, "ask", "how does retry work?"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ask_env(model),
        )
        assert ask.stdout is not None
        printed: list[str] = []
        for line in ask.stdout:
            printed.append(line.strip())
            if sum(p.startswith("… waiting for the model") for p in printed) == 2:
                released.set()  # the model answers only once the line was printed and updated
        ask.wait(120)
    waiting = [p for p in printed if p.startswith("… waiting for the model")]
    assert ask.returncode == 0, (printed, ask.stderr.read() if ask.stderr else "")
    assert len(waiting) >= 2 and waiting[0] != waiting[1]
    assert printed.index(waiting[0]) < next(
        i for i, p in enumerate(printed) if "reading `payments/retry.py`" in p
    )
