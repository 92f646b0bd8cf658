"""Pure formatting for Discord: no I/O, no discord.py objects, only strings and payload dicts.

Discord limits (docs/platform-notes.md §2c): 2,000 characters of content per message for bots; an
embed description of 4,096 and 6,000 characters across a message's embeds; thread names of
100. Answers are split on paragraph or code-block boundaries where possible, and a code block
that has to be cut is closed at the end of one message and reopened (same fence and language)
at the start of the next, so no message ever shows a broken block.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from bot import texts
from bot.chunking import annotate, split_keeping_code_blocks
from worker.agent.citations import Source
from worker.jobs.sink import Answer

MESSAGE_CHARS = 2000
EMBED_DESCRIPTION_CHARS = 4096
EMBED_TOTAL_CHARS = 6000
THREAD_NAME_CHARS = 100
NONCE_CHARS = 25
MAX_ANSWER_MESSAGES = 10  # beyond this an answer is cut, with a notice
_LINK_TARGET = re.compile(r"\]\((https?://[^\s()<>]+)\)")
_MENTION_TOKEN = "<@{id}>", "<@!{id}>"
SOURCES_HEADING = "**Sources**"


def split_message(text: str, limit: int = MESSAGE_CHARS) -> list[str]:
    """Split markdown into messages of at most `limit` characters, code blocks kept intact."""
    return split_keeping_code_blocks(text, limit)


def suppress_link_previews(text: str) -> str:
    """`[a](https://x)` -> `[a](<https://x>)` outside code: Discord then shows no preview card
    for every cited line (the links still work)."""
    out = []
    for line in annotate(text.split("\n")):
        inside = line.open_before is not None or line.open_after is not None
        out.append(line.text if inside else _LINK_TARGET.sub(r"](<\1>)", line.text))
    return "\n".join(out)


def _split_sources_section(markdown: str) -> tuple[str, list[str]]:
    """(body without the Sources list, the notes that followed the list such as 'unverified')."""
    at = markdown.rfind("\n\n" + SOURCES_HEADING + "\n")
    if at < 0:
        return markdown, []
    tail = markdown[at + len(SOURCES_HEADING) + 3 :].split("\n")
    notes = [line for line in tail if line and not line.startswith("- ")]  # and the commits read
    return markdown[:at].rstrip(), notes


def sources_embed(sources: list[Source]) -> dict[str, Any] | None:
    """The Sources list as one embed within Discord's limits; None when there is none."""
    if not sources:
        return None
    title = texts.DISCORD_SOURCES_TITLE
    budget = min(EMBED_DESCRIPTION_CHARS, EMBED_TOTAL_CHARS - len(title)) - 40
    lines: list[str] = []
    used = 0
    for index, source in enumerate(sources):
        line = f"• [{source.label}]({source.url})" if source.url else f"• `{source.label}`"
        if used + len(line) + 1 > budget:
            lines.append(texts.DISCORD_SOURCES_MORE.format(count=len(sources) - index))
            break
        lines.append(line)
        used += len(line) + 1
    return {"type": "rich", "title": title, "description": "\n".join(lines)}


@dataclass(frozen=True)
class AnswerMessages:
    chunks: list[str]  # message contents, each at most MESSAGE_CHARS
    embed: dict[str, Any] | None  # goes on the last message


def render_answer(answer: Answer, limit: int = MESSAGE_CHARS) -> AnswerMessages:
    """The answer's messages: the Sources list moves into an embed, links show no previews."""
    body, notes = _split_sources_section(answer.markdown)
    embed = sources_embed(answer.sources) if body != answer.markdown else None
    if embed is None:
        body, notes = answer.markdown, []
    text = suppress_link_previews("\n\n".join([body, *notes]) if notes else body)
    chunks = split_message(text, limit) or ["…"]
    if len(chunks) > MAX_ANSWER_MESSAGES:
        cut = texts.DISCORD_ANSWER_CUT.format(count=MAX_ANSWER_MESSAGES)
        last = split_message(chunks[MAX_ANSWER_MESSAGES - 1], limit - len(cut) - 2)[0]
        chunks = [*chunks[: MAX_ANSWER_MESSAGES - 1], f"{last}\n\n{cut}"]
    return AnswerMessages(chunks, embed)


def one_message(text: str, limit: int = MESSAGE_CHARS) -> str:
    """A short text (progress, an apology) cut to one message."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def message_nonce(question_id: str, slot: str) -> str:
    """Deterministic per (question, message slot) so a retried job gets the same message back
    instead of posting a second one (Discord dedupes on `nonce` with `enforce_nonce`)."""
    digest = hashlib.sha256(question_id.encode()).hexdigest()[: NONCE_CHARS - 1 - len(slot)]
    return f"{digest}-{slot}"


def strip_mentions_of(content: str, user_id: int) -> str:
    """The question text: the bot's own `<@id>` / `<@!id>` tokens removed, spaces tidied."""
    for token in _MENTION_TOKEN:
        content = content.replace(token.format(id=user_id), " ")
    return re.sub(r"[ \t]{2,}", " ", content).strip()


def thread_name(question: str) -> str:
    first = " ".join(question.split())
    if not first:
        return texts.DISCORD_THREAD_FALLBACK_NAME
    return first if len(first) <= THREAD_NAME_CHARS else first[: THREAD_NAME_CHARS - 1] + "…"
