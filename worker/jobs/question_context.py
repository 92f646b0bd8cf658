"""The context a question is asked in, read as its job starts (never by the adapter, which must
ack the platform at once): the earlier messages of its chat thread and the files attached to
them and to the question itself, through the platform's reader registered in the Runtime, or
the log the console's asker pasted.

A question that opened its thread (a top-level mention) has no earlier messages: its own
message is read only when the platform's event said it carries files (`attached_files`), so a
plain question costs no platform call.

Whatever goes wrong reading the thread, the question is still answered: the failure is logged
(one line, redacted, no traceback: the platform's error is expected, not a bug of ours) and the
asker's answer starts with a line saying the thread could not be read; likewise one line per
attached file not read whole. The messages that were questions to the bot already answered in
this thread are left out: thread memory gives them with their answers (worker/jobs/threads.py);
their files stay.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from worker.conversation.context import UNREADABLE, ThreadContext, pasted_context, same_words, thread_context
from worker.conversation.files import MAX_FILES_READ, read_files
from worker.conversation.thread import ThreadMessage
from worker.jobs import texts
from worker.jobs.question import Question, reference_id
from worker.jobs.reply_chain_context import read_reply_chain_context
from worker.jobs.runtime import Runtime
from worker.ops.inert import inert_line

log = logging.getLogger("codebot.conversation")
MAX_FILE_NOTES = 5  # lines about files at the start of an answer; more are counted in one


def read_question_context(
    runtime: Runtime, question: Question, redact: Callable[[str], str]
) -> ThreadContext:
    settings = runtime.settings
    if question.pasted:
        return pasted_context(question.pasted, settings, redact)
    target = question.target
    reader = runtime.threads.get(target.platform)
    thread = target.thread or target.message
    # a top-level mention's answer opens its thread: nothing was written in it before
    opens_thread = thread == target.message
    if target.replied_to and opens_thread:  # a reply outside a thread: its chain
        return read_reply_chain_context(runtime, question, redact)
    own_files = question.attached_files > 0 and settings.thread_context_file_bytes > 0
    if (
        reader is None
        or not thread
        or settings.thread_context_messages == 0
        or (opens_thread and not own_files)
    ):
        return ThreadContext()
    try:
        messages = reader(settings, target.channel, thread, target.message)
    except Exception as exc:  # a reader's bug included: the question goes on without its thread
        log.warning(
            "question %s: the %s could not be read: %s",
            reference_id(question.id),
            "question's message" if opens_thread else "thread",
            inert_line(redact(f"{type(exc).__name__}: {exc}")),
        )
        return ThreadContext() if opens_thread else UNREADABLE
    messages = _not_remembered(messages, question, redact)
    with_files, notes = read_files(messages, settings, redact)
    # the question's own words are the question: only its files' entries stay
    context = thread_context([m for m in with_files if not m.asking], settings, redact, notes)
    log.info(
        "question %s: thread context of %d message(s), %d dropped; files not read whole: %s",
        reference_id(question.id),
        context.kept,
        context.dropped,
        inert_line(", ".join(f"{note.name} ({note.problem or 'cut'})" for note in context.files) or "none"),
    )
    return context


def _not_remembered(
    messages: list[ThreadMessage], question: Question, redact: Callable[[str], str]
) -> list[ThreadMessage]:
    """The messages without the questions thread memory holds already (they come with their
    answers as history turns); such a question's files stay, under its author."""
    asked = {same_words(turn.question) for turn in question.history}
    if not asked:  # nothing remembered: no message needs redacting to be compared
        return messages
    kept = []
    for message in messages:
        if message.asking or same_words(redact(message.text)) not in asked:
            kept.append(message)
        elif message.files:
            kept.append(dataclasses.replace(message, text=""))
    return kept


def context_note(context: ThreadContext) -> str:
    """The lines the answer starts with when the model did not get the whole thread or all its
    files, else ""."""
    lines = []
    if context.unreadable:
        lines.append(texts.CHAIN_UNREADABLE_NOTE if context.chain else texts.THREAD_UNREADABLE_NOTE)
    elif context.dropped:
        trimmed = texts.CHAIN_TRIMMED_NOTE if context.chain else texts.THREAD_TRIMMED_NOTE
        lines.append(trimmed.format(kept=context.kept - 1, dropped=context.dropped))
    for note in context.files[:MAX_FILE_NOTES]:
        if note.problem is None:
            lines.append(texts.FILE_CUT_NOTE.format(name=note.name))
        else:
            lines.append(texts.FILE_NOT_READ_NOTES[note.problem].format(name=note.name, count=MAX_FILES_READ))
    if len(context.files) > MAX_FILE_NOTES:
        lines.append(texts.FILE_NOTES_MORE.format(count=len(context.files) - MAX_FILE_NOTES))
    return "\n".join(lines)
