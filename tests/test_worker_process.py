"""`codebot worker`: parallel questions, and a question survives its work horse being killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

from tests.support.e2e import Rig
from tests.support.model_server import last_user_text, slow, text, tool_calls


def start_worker(rig: Rig, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "CODEBOT_DATA_DIR": str(rig.settings.data_dir),
        "CODEBOT_REPOS_FILE": str(rig.settings.repos_file),
        "OPENAI_BASE_URL": rig.model.base_url,
        "OPENAI_API_KEY": "k",
        "CODEBOT_MODEL_MAX_RETRIES": "0",
    }
    return subprocess.Popen([sys.executable, "-m", "codebot.cli", "worker", *args], env=env, text=True)


def test_a_worker_with_concurrency_answers_questions_in_parallel(rig: Rig) -> None:
    def answer(body: dict[str, Any]) -> Any:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return slow(2.0, tool_calls(("list_repos", {})))
        return slow(2.0, text(f"answer to {last_user_text(body)}"))

    rig.model.set_handler(answer)
    questions = [rig.question(f"question {i}") for i in range(4)]
    for question in questions:
        rig.enqueue(question)
    worker = start_worker(rig, "--burst", "--concurrency", "4")
    assert worker.wait(timeout=60) == 0
    for question in questions:
        kind, fields = rig.final(rig.events(question))
        assert kind == "answer" and question.text in fields["markdown"]
    # In parallel, all four first turns reach the model before any second turn; one at a time,
    # a question's second turn would follow its first.
    turns = [
        "second" if any(m["role"] == "tool" for m in r["messages"]) else "first" for r in rig.model.requests
    ]
    assert turns[:4] == ["first"] * 4


def test_a_killed_work_horse_is_retried_and_the_asker_gets_exactly_one_answer(rig: Rig) -> None:
    rig.model.enqueue(slow(30, text("never delivered")))
    rig.model.set_handler(
        lambda body: tool_calls(("list_repos", {})) if len(body["messages"]) < 3 else text("second try")
    )
    question = rig.question("how does retry work?")
    rig.enqueue(question)
    worker = start_worker(rig, "--burst", "--pool", "fork")
    try:
        rig.model.wait_for_requests(1)
        horse = subprocess.run(
            ["pgrep", "-P", str(worker.pid)], capture_output=True, text=True
        ).stdout.split()
        assert horse, "the worker should be running the question in a forked work horse"
        os.kill(int(horse[0]), signal.SIGKILL)
        assert worker.wait(timeout=60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    events = rig.events(question, timeout=5)
    kind, fields = rig.final(events)
    assert kind == "answer" and "second try" in fields["markdown"]
    assert any(k == "progress" and "trying again" in f.get("text", "") for k, f in events)


def test_sigterm_lets_the_running_question_finish_before_the_worker_exits(rig: Rig) -> None:
    rig.model.enqueue(slow(2.0, tool_calls(("list_repos", {}))), text("finished after SIGTERM"))
    question = rig.question("how does retry work?")
    rig.enqueue(question)
    worker = start_worker(rig, "--concurrency", "2")  # not burst: it would idle forever without the signal
    try:
        rig.model.wait_for_requests(1)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    kind, fields = rig.final(rig.events(question, timeout=5))
    assert kind == "answer" and "finished after SIGTERM" in fields["markdown"]
