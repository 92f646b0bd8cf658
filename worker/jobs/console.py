"""`codebot ask`: the whole path from a terminal, through the same queue and job as chat.

The question is enqueued like any other; when no worker is listening, this process becomes
a burst worker for it (same code path), while a thread prints the job's progress stream. The
exit code names the outcome (worker/jobs/exit_codes.py): 0 only for an answer from code it read.
"""

from __future__ import annotations

import getpass
import threading
import time
import uuid
from collections.abc import Callable

from redis import Redis
from rich.console import Console
from rich.status import Status
from rich.text import Text
from rq import Queue, SimpleWorker, Worker

from config.settings import Settings
from worker.agent.progress_lines import WAITING_LINES
from worker.conversation.context import storable_paste
from worker.jobs import runtime as runtime_module
from worker.jobs.command_channel import subscribe_to_commands, unsubscribe_from_commands
from worker.jobs.exit_codes import EXIT_FAILED, exit_code
from worker.jobs.question import Question, ReplyTarget, event_identity
from worker.jobs.queue import QUESTIONS_QUEUE, enqueue_question, job_timeout_seconds
from worker.jobs.runtime import Runtime
from worker.jobs.scope import redact_and_extract_repos, resolve_scope
from worker.jobs.sink import read_console_events
from worker.ops.inert import inert
from worker.repos.secrets.redaction import get_redactor
from worker.repos.sync_cli import run_sync

MISSING_MODEL_MESSAGE = """\
codebot needs a model endpoint (any OpenAI-compatible one). Set, in the environment or in .env:
  OpenAI:      OPENAI_API_KEY=sk-...                       (CODEBOT_MODEL defaults to {model})
  OpenRouter:  OPENAI_BASE_URL=https://openrouter.ai/api/v1  OPENAI_API_KEY=sk-or-...  CODEBOT_MODEL=openai/gpt-4o-mini
  Ollama:      OPENAI_BASE_URL=http://localhost:11434/v1  CODEBOT_MODEL=qwen2.5-coder:7b
               (start Ollama with OLLAMA_CONTEXT_LENGTH=16384: its 4,096-token default is too small)
  vLLM:        OPENAI_BASE_URL=http://localhost:8000/v1  CODEBOT_MODEL=<the served model>
               (start vLLM with --enable-auto-tool-choice --tool-call-parser ...)
  llama.cpp:   OPENAI_BASE_URL=http://localhost:8080/v1  (start llama-server with --jinja -c 16384)
What each server needs, and what codebot works out by itself: docs/models.md
No endpoint yet? See what codebot reads, with no model: codebot repos sync && codebot tool search --args '{{"pattern": "retry"}}'"""
PIPED_WAITING_SECONDS = 5.0  # a waiting line printed to a pipe: at most one per this, unless its kind changed
EMPTY_QUESTION_MESSAGE = 'Ask a question, e.g. codebot ask "Where are slash commands handled?"'


def missing_model_message(settings: Settings) -> str | None:
    """What to set, when no model endpoint is configured (a key, or a base URL for local servers)."""
    if settings.openai_api_key or settings.openai_base_url:
        return None
    return MISSING_MODEL_MESSAGE.format(model=settings.model)


def workers_listening(redis: Redis) -> int:
    queue = Queue(QUESTIONS_QUEUE, connection=redis)
    return sum(1 for worker in Worker.all(queue=queue) if worker.state != "suspended")


def run_ask(
    runtime: Runtime,
    connect_redis: Callable[[], Redis],
    text: str,
    repo: str | None,
    out: Console,
    pasted: str = "",
) -> int:
    """Check the question, scope and model endpoint first: a first run that cannot answer
    leaves no Redis server behind."""
    settings = runtime.settings
    cleaned, requested = redact_and_extract_repos(text)
    if repo:
        requested.append(repo.lower())
    if not cleaned:
        out.print(EMPTY_QUESTION_MESSAGE)
        return 2
    scope = resolve_scope(runtime.whitelist, None, requested)
    if scope.refusal:
        out.print(inert(scope.refusal), markup=False)
        return 2
    missing_model = missing_model_message(settings)
    if missing_model:
        # soft_wrap: each line stays whole for copying, whatever the terminal's width
        out.print(missing_model, markup=False, highlight=False, soft_wrap=True)
        return 2
    redis = connect_redis()
    missing = [name for name in scope.repos if runtime.mirrors.current(name) is None]
    if (
        missing
        and run_sync(settings, runtime.whitelist, missing, out) != 0
        and all(runtime.mirrors.current(name) is None for name in scope.repos)
    ):
        return 1
    question = Question(
        id=event_identity("console", uuid.uuid4().hex),
        asker=getpass.getuser(),
        target=ReplyTarget(platform="console", channel="console"),
        text=cleaned,
        repos=scope.repos,
        # stored redacted and within the budget: the queue and the question's record never hold more
        pasted=storable_paste(pasted, settings, get_redactor().redact),
    )
    return _answer_and_print(runtime, redis, question, out)


class ConsoleWorker(SimpleWorker):
    """The in-process worker of `codebot ask`: RQ's SimpleWorker, whose exit no longer waits out
    a 60 s read of its command channel (worker/jobs/command_channel.py)."""

    def subscribe(self) -> None:
        subscribe_to_commands(self)

    def unsubscribe(self) -> None:
        unsubscribe_from_commands(self)


def _answer_and_print(runtime: Runtime, redis: Redis, question: Question, out: Console) -> int:
    """Queue the question and print its events as they come; answer it in this process when no
    worker is listening. The exit code of its outcome."""
    settings = runtime.settings
    enqueue_question(redis, question, settings)
    status: dict[str, int] = {}
    printer = threading.Thread(
        target=_print_events,
        args=(redis, question.id, 2.0 * job_timeout_seconds(settings), out, status),
        daemon=True,
    )
    printer.start()
    if workers_listening(redis) == 0:
        # Nobody else will take it: answer here, in this process, through the same job code,
        # with the runtime already built (else the job would build a second one from the env).
        runtime_module.install(runtime)
        ConsoleWorker([Queue(QUESTIONS_QUEUE, connection=redis)], connection=redis).work(
            burst=True, logging_level="WARNING"
        )
    else:
        out.print("[dim]queued for a running worker…[/dim]")
    printer.join()
    return status.get("code", EXIT_FAILED)


class WaitingLine:
    """The line shown while the model's reply is awaited (worker/agent/waiting.py): updated in
    place on a terminal; elsewhere (a pipe, a log) printed as lines of their own, at most one per
    PIPED_WAITING_SECONDS unless the model went from waiting to writing."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.status: Status | None = None
        self.printed_at = float("-inf")
        self.writing = False

    def show(self, text: str) -> None:
        line = Text(f"… {inert(text)}", style="dim")  # never markup, as every progress line
        if self.out.is_terminal:
            if self.status is None:
                self.status = self.out.status(line)
                self.status.start()
            else:
                self.status.update(line)
            return
        now, writing = time.monotonic(), text.startswith(WAITING_LINES["writing"].split(",")[0])
        if now - self.printed_at >= PIPED_WAITING_SECONDS or writing != self.writing:
            self.out.print(line)
            self.printed_at, self.writing = now, writing

    def clear(self) -> None:
        """Something else is printed: the line in place goes (the next one starts afresh)."""
        if self.status is not None:
            self.status.stop()
            self.status = None
        self.printed_at, self.writing = float("-inf"), False


def _print_events(
    redis: Redis, question_id: str, timeout: float, out: Console, status: dict[str, int]
) -> None:
    waiting = WaitingLine(out)
    for kind, fields in read_console_events(redis, question_id, timeout):
        if kind == "waiting":
            waiting.show(str(fields.get("text", "")))
            continue
        waiting.clear()
        if kind == "progress":
            # A Text, never markup: a tool argument in it ("[link=…]", "[/]") is shown as typed.
            out.print(Text(f"… {inert(str(fields.get('text', '')))}", style="dim"))
        elif kind == "answer":
            out.print()
            # soft_wrap: a commit-pinned link longer than the terminal is never cut in two
            out.print(inert(str(fields.get("markdown", ""))), markup=False, highlight=False, soft_wrap=True)
            status["code"] = exit_code(str(fields.get("outcome", "answered")))
        elif kind == "failed":
            out.print(inert(str(fields.get("text", ""))), markup=False, highlight=False, soft_wrap=True)
            status["code"] = exit_code(str(fields.get("outcome", "failed")))
    if "code" not in status:
        out.print("No answer arrived in time: is a worker running? (codebot worker)")
