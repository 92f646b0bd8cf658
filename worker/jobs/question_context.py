"""The context a question is asked in, read as its job starts (never by the adapter, which must
ack the platform at once): the earlier messages of its chat thread, through the platform's
reader registered in the Runtime, or the log the console's asker pasted.

Whatever goes wrong reading the thread, the question is still answered: the failure is logged
(one line, redacted, no traceback: the platform's error is expected, not a bug of ours) and the
asker's answer starts with a line saying the thread could not be read. The messages that
were questions to the bot already answered in this thread are left out: thread memory gives
them with their answers (worker/jobs/threads.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from worker.conversation.context import UNREADABLE, ThreadContext, pasted_context, same_words, thread_context
from worker.jobs import texts
from worker.jobs.question import Question, reference_id
from worker.jobs.reply_chain_context import read_reply_chain_context
from worker.jobs.runtime import Runtime
from worker.ops.inert import inert_line

log = logging.getLogger("codebot.conversation")


def read_question_context(
    runtime: Runtime, question: Question, redact: Callable[[str], str]
) -> ThreadContext:
    settings = runtime.settings
    if question.pasted:
        return pasted_context(question.pasted, settings, redact)
    target = question.target
    reader = runtime.threads.get(target.platform)
    # a top-level mention's answer opens its thread: nothing was written in it before
    opens_thread = target.thread == target.message
    if target.replied_to and (opens_thread or not target.thread):  # a reply outside a thread
        return read_reply_chain_context(runtime, question, redact)
    if reader is None or not target.thread or opens_thread or settings.thread_context_messages == 0:
        return ThreadContext()
    try:
        messages = reader(settings, target.channel, target.thread, target.message)
    except Exception as exc:  # a reader's bug included: the question goes on without its thread
        log.warning(
            "question %s: the thread could not be read: %s",
            reference_id(question.id),
            inert_line(redact(f"{type(exc).__name__}: {exc}")),
        )
        return UNREADABLE
    # the questions the thread memory holds already come with their answers (history turns)
    asked = {same_words(turn.question) for turn in question.history}
    messages = [message for message in messages if same_words(redact(message.text)) not in asked]
    context = thread_context(messages, settings, redact)
    log.info(
        "question %s: thread context of %d message(s), %d dropped",
        reference_id(question.id),
        context.kept,
        context.dropped,
    )
    return context


def context_note(context: ThreadContext) -> str:
    """The line the answer starts with when the model did not get the whole thread, else ""."""
    if context.unreadable:
        return texts.CHAIN_UNREADABLE_NOTE if context.chain else texts.THREAD_UNREADABLE_NOTE
    if context.dropped:
        trimmed = texts.CHAIN_TRIMMED_NOTE if context.chain else texts.THREAD_TRIMMED_NOTE
        return trimmed.format(kept=context.kept - 1, dropped=context.dropped)
    return ""
