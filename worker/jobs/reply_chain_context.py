"""The chain of messages a question replied to outside a thread, read as its job starts through
the platform's chain reader registered in the Runtime (Discord: bot/discord/reply_chain.py).

As for a thread (worker/jobs/question_context.py): the files attached to the chain's messages,
and to the question itself (its own message read through the thread reader only when the event
said it carries files), reach the model; whatever goes wrong reading the chain, the question is
still answered, with one redacted log line and a line in the answer saying so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from worker.conversation.chain import CHAIN_UNREADABLE, chain_context
from worker.conversation.context import ThreadContext
from worker.conversation.files import read_files
from worker.conversation.thread import ThreadMessage
from worker.jobs.question import Question, reference_id
from worker.jobs.runtime import Runtime
from worker.ops.inert import inert_line

log = logging.getLogger("codebot.conversation")


def read_reply_chain_context(
    runtime: Runtime, question: Question, redact: Callable[[str], str]
) -> ThreadContext:
    settings, target = runtime.settings, question.target
    reader = runtime.reply_chains.get(target.platform)
    if reader is None or not target.replied_to or settings.thread_context_messages == 0:
        return ThreadContext()
    try:
        messages = reader(settings, target.channel, target.replied_to)
    except Exception as exc:  # a reader's bug included: the question goes on without its chain
        log.warning(
            "question %s: the messages it replied to could not be read: %s",
            reference_id(question.id),
            inert_line(redact(f"{type(exc).__name__}: {exc}")),
        )
        return CHAIN_UNREADABLE
    messages = [*messages, *_own_message(runtime, question, redact)]
    with_files, notes = read_files(messages, settings, redact)
    # the question's own words are the question: only its files' entries stay
    context = chain_context([m for m in with_files if not m.asking], settings, redact, notes)
    log.info(
        "question %s: reply chain context of %d message(s), %d dropped",
        reference_id(question.id),
        context.kept,
        context.dropped,
    )
    return context


def _own_message(runtime: Runtime, question: Question, redact: Callable[[str], str]) -> list[ThreadMessage]:
    """The question's own message (for its files), read only when the event said it has some; []
    when it has none or cannot be read (logged: the chain is still the question's context)."""
    target, settings = question.target, runtime.settings
    reader = runtime.threads.get(target.platform)
    message = target.message
    if (
        reader is None
        or not message
        or question.attached_files <= 0
        or settings.thread_context_file_bytes <= 0
    ):
        return []
    try:
        return [m for m in reader(settings, target.channel, message, message) if m.asking]
    except Exception as exc:  # a reader's bug included: the question goes on without its files
        log.warning(
            "question %s: the question's message could not be read: %s",
            reference_id(question.id),
            inert_line(redact(f"{type(exc).__name__}: {exc}")),
        )
        return []
