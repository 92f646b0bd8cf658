"""The chain of messages a question replied to outside a thread, read as its job starts through
the platform's chain reader registered in the Runtime (Discord: bot/discord/reply_chain.py).

As for a thread (worker/jobs/question_context.py): whatever goes wrong reading the chain, the
question is still answered, with one redacted log line and a line in the answer saying so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from worker.conversation.chain import CHAIN_UNREADABLE, chain_context
from worker.conversation.context import ThreadContext
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
    context = chain_context(messages, settings, redact)
    log.info(
        "question %s: reply chain context of %d message(s), %d dropped",
        reference_id(question.id),
        context.kept,
        context.dropped,
    )
    return context
