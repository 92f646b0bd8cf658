"""Pure formatting for Discord: no I/O, no discord.py objects, only strings and payload dicts.

Discord limits (PLATFORM_NOTES §2c): 2,000 characters of content per message for bots; an
embed description of 4,096 and 6,000 characters across a message's embeds; thread names of
100. Answers are split on paragraph or code-block boundaries where possible, and a code block
that has to be cut is closed at the end of one message and reopened (same fence and language)
at the start of the next, so no message ever shows a broken block.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot import texts
from worker.sink import Answer, Source

MESSAGE_CHARS = 2000
EMBED_DESCRIPTION_CHARS = 4096
EMBED_TOTAL_CHARS = 6000
THREAD_NAME_CHARS = 100
NONCE_CHARS = 25
MAX_ANSWER_MESSAGES = 10  # beyond this an answer is cut, with a notice
# A reopened fence keeps at most this much of its opening line (``` plus the language).
MAX_REOPEN_CHARS = 40
# Lines longer than this are cut (at a space if possible) so one line always fits a message
# together with a reopened fence and its closing fence.
MAX_LINE_CHARS = MESSAGE_CHARS - 2 * (MAX_REOPEN_CHARS + 1) - 8
# A preferred break (blank line, end of a code block) is taken only if the message before it
# is at least this fraction of the limit; otherwise the message is filled up to the limit.
MIN_FILL = 0.4

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_LINK_TARGET = re.compile(r"\]\((https?://[^\s()<>]+)\)")
_MENTION_TOKEN = "<@{id}>", "<@!{id}>"
SOURCES_HEADING = "**Sources**"


@dataclass(frozen=True)
class _Line:
    text: str
    open_before: str | None  # the fence line of the code block this line starts inside, if any
    open_after: str | None  # the same after this line


def _annotate(lines: Iterable[str]) -> list[_Line]:
    out: list[_Line] = []
    opener: str | None = None
    for text in lines:
        before = opener
        match = _FENCE.match(text)
        if match:
            marker = match.group(1)
            if opener is None:
                opener = text.strip()
            else:
                open_marker = _FENCE.match(opener)
                assert open_marker is not None
                om = open_marker.group(1)
                if marker[0] == om[0] and len(marker) >= len(om) and not match.group(2).strip():
                    opener = None
        out.append(_Line(text, before, opener))
    return out


def _closer(opener: str) -> str:
    match = _FENCE.match(opener)
    assert match is not None
    return match.group(1)


def _reopen(opener: str) -> str:
    return opener[:MAX_REOPEN_CHARS]


def _render(start_open: str | None, lines: list[_Line]) -> str:
    parts = [_reopen(start_open)] if start_open else []
    parts.extend(line.text for line in lines)
    end_open = lines[-1].open_after if lines else start_open
    if end_open:
        parts.append(_closer(end_open))
    return "\n".join(parts)


def _cut_long_line(text: str, limit: int) -> list[str]:
    pieces: list[str] = []
    while len(text) > limit:
        cut = text.rfind(" ", limit // 2, limit)
        cut = cut if cut > 0 else limit
        pieces.append(text[:cut])
        text = text[cut:].lstrip(" ") if cut < limit else text[cut:]
    pieces.append(text)
    return pieces


def _break_index(start_open: str | None, buf: list[_Line], limit: int) -> int:
    """How many lines of buf go in this message: a late blank line or code-block end if any."""
    minimum = int(limit * MIN_FILL)
    for n in range(len(buf) - 1, 0, -1):
        line = buf[n - 1]
        paragraph_end = buf[n].text.strip() == "" and buf[n].open_before is None and buf[n].open_after is None
        block_end = line.open_before is not None and line.open_after is None
        if (paragraph_end or block_end) and len(_render(start_open, buf[:n])) >= minimum:
            return n
    last = buf[-1]
    if len(buf) > 1 and last.open_before is None and last.open_after is not None:
        return len(buf) - 1  # a code block's opening line goes with its first lines
    return len(buf)


def split_message(text: str, limit: int = MESSAGE_CHARS) -> list[str]:
    """Split markdown into messages of at most `limit` characters, code blocks kept intact."""
    line_limit = min(MAX_LINE_CHARS, limit - 2 * (MAX_REOPEN_CHARS + 1) - 8)
    raw: list[str] = []
    for text_line in text.strip("\n").split("\n"):
        raw.extend(_cut_long_line(text_line, line_limit))
    chunks: list[str] = []
    start_open: str | None = None
    buf: list[_Line] = []
    for line in _annotate(raw):
        while buf and len(_render(start_open, [*buf, line])) > limit:
            n = _break_index(start_open, buf, limit)
            chunks.append(_render(start_open, buf[:n]))
            start_open = buf[n - 1].open_after
            rest = buf[n:]
            while rest and rest[0].text.strip() == "" and rest[0].open_before is None:
                rest = rest[1:]  # a message never starts with blank lines
            buf = rest
        buf.append(line)
    if buf:
        chunks.append(_render(start_open, buf))
    return [c for c in chunks if c.strip()]


def suppress_link_previews(text: str) -> str:
    """`[a](https://x)` -> `[a](<https://x>)` outside code: Discord then shows no preview card
    for every cited line (the links still work)."""
    out = []
    for line in _annotate(text.split("\n")):
        inside = line.open_before is not None or line.open_after is not None
        out.append(line.text if inside else _LINK_TARGET.sub(r"](<\1>)", line.text))
    return "\n".join(out)


def _split_sources_section(markdown: str) -> tuple[str, list[str]]:
    """(body without the Sources list, the notes that followed the list such as 'unverified')."""
    at = markdown.rfind("\n\n" + SOURCES_HEADING + "\n")
    if at < 0:
        return markdown, []
    tail = markdown[at + len(SOURCES_HEADING) + 3 :].split("\n")
    notes = [line for line in tail if not line.startswith("- ")]
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
