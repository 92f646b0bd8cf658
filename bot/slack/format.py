"""The model's Markdown as Slack mrkdwn messages: pure functions, no I/O.

Slack shows standard Markdown literally, so links become `<url|text>`, `**bold**` becomes
`*bold*` and headings become bold lines; code blocks are kept (without their language tag,
which mrkdwn would print). Everything that is not markup we produce is escaped (`& < >`), so
nothing from the model or a repo can form a Slack control sequence: `<!channel>`, `<!here>`,
`<!everyone>`, `<@U…>`, `<!subteam^…>` all arrive as plain text, and a literal `@here`,
`@channel` or `@everyone` gets an invisible word joiner so it cannot notify either.

Slack truncates a message above 40,000 characters and advises ~4,000, so a reply is split
into chunks of about 3,500 characters on paragraph and line boundaries; a code block cut in
two is closed at the end of one chunk and reopened at the start of the next.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from bot import texts
from bot.chunking import split_keeping_code_blocks

SLACK_TEXT_LIMIT_CHARS = 40_000  # Slack truncates chat.postMessage text beyond this
CHUNK_CHARS = 3_500  # what one message of ours holds at most
MAX_MESSAGES = 20  # an answer longer than this many chunks is cut with a notice
FENCE = "```"

_FENCE_LINE = re.compile(r"^\s{0,3}(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_QUOTE = re.compile(r"^(\s*(?:>\s?)+)(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_LINK = re.compile(
    r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]"  # [text], one level of nested brackets allowed
    r"\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?(?:\s+\"[^\"]*\")?\s*\)"  # (url "title")
)
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^<>\s]+)>")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC = re.compile(r"(?<![*\w])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_BROADCAST = re.compile(r"@(here|channel|everyone)\b", re.IGNORECASE)
_SAFE_SCHEMES = ("http://", "https://", "mailto:")
_BOLD_MARK = "\x02"  # stands for a bold `*` while italics are converted
_LINK_MARK = "\x03"  # stands for a link while the text around it is escaped
_WORD_JOINER = "\u2060"
_BROKEN_FENCE = "`\u200b`\u200b`"  # looks like ``` but never opens or closes a code block


def escape(text: str) -> str:
    """The only three characters Slack wants escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def neutralise(text: str) -> str:
    """Escape control sequences and break literal broadcast words; for text with no markup."""
    return _BROADCAST.sub(lambda m: "@" + _WORD_JOINER + m.group(1), escape(text))


def _safe_url(url: str) -> str | None:
    if not url.lower().startswith(_SAFE_SCHEMES):
        return None
    return escape(url.replace("|", "%7C").replace(" ", "%20"))


def _plain(text: str) -> str:
    """Inline Markdown without code spans or links -> mrkdwn."""
    text = _BOLD.sub(lambda m: _BOLD_MARK + m.group(2) + _BOLD_MARK, escape(text))
    text = _ITALIC.sub(lambda m: "_" + m.group(1) + "_", text)
    text = _STRIKE.sub(lambda m: "~" + m.group(1) + "~", text)
    return _BROADCAST.sub(lambda m: "@" + _WORD_JOINER + m.group(1), text.replace(_BOLD_MARK, "*"))


def _inline_text(text: str) -> str:
    """Links and autolinks become `<url|text>`; everything else goes through _plain()."""
    links: list[str] = []

    def keep(rendered: str) -> str:
        links.append(rendered)
        return _LINK_MARK

    def link(match: re.Match[str]) -> str:
        label, url = match.group(2), _safe_url(match.group(3))
        shown = _plain(label.replace("**", "").replace("`", "")).replace("|", "¦") or escape(match.group(3))
        return keep(f"<{url}|{shown}>" if url else f"{shown} ({escape(match.group(3))})")

    text = _LINK.sub(link, text.replace(_LINK_MARK, "").replace(_BOLD_MARK, ""))
    text = _AUTOLINK.sub(lambda m: keep(f"<{_safe_url(m.group(1))}>"), text)
    rendered = _plain(text).replace(FENCE, _BROKEN_FENCE)  # a stray ``` would open a code block
    return re.sub(_LINK_MARK, lambda _m: links.pop(0), rendered)


def _inline(line: str) -> str:
    """A line outside code blocks: code spans kept (escaped), the rest converted."""
    out: list[str] = []
    last = 0
    for match in _CODE_SPAN.finditer(line):
        out.append(_inline_text(line[last : match.start()]))
        body = match.group(2)
        ticks = "`" if "`" not in body.strip() else match.group(1)
        out.append(ticks + neutralise(body.strip() if ticks == "`" else body) + ticks)
        last = match.end()
    out.append(_inline_text(line[last:]))
    return "".join(out)


def _block_line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        title = _inline(heading.group(1)).replace("*", "")
        return f"*{title}*" if title else ""
    if _RULE.match(line):
        return "──────────"
    quote = _QUOTE.match(line)
    if quote and quote.group(2):
        return ">" + " " + _block_line(quote.group(2))
    bullet = _BULLET.match(line)
    if bullet:
        return f"{bullet.group(1)}• {_inline(bullet.group(2))}"
    return _inline(line)


def _code_line(line: str) -> str:
    """Inside a code block: escaped, and no run of backticks that would close Slack's block."""
    return neutralise(line).replace(FENCE, _BROKEN_FENCE)


def to_mrkdwn(markdown: str) -> str:
    """Convert the model's Markdown to mrkdwn; code fences become bare ``` lines."""
    out: list[str] = []
    fence: str | None = None  # the opening marker while inside a code block
    for line in markdown.replace("\r\n", "\n").split("\n"):
        match = _FENCE_LINE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
                out.append(FENCE)
                continue
            out.append(_block_line(line))
            continue
        marker = match.group(1) if match and not match.group(2).strip() else ""
        if marker[:1] == fence[0] and len(marker) >= len(fence):
            fence = None
            out.append(FENCE)
        else:
            out.append(_code_line(line))
    if fence is not None:
        out.append(FENCE)  # the model forgot to close its block: close it for Slack
    return "\n".join(out).strip("\n")


# --- splitting -------------------------------------------------------------------------------


def _cut_point(text: str, limit: int) -> int:
    """Where to cut an overlong line: the last space before `limit` outside a link, never
    inside an `&…;` entity or a `<…>` link."""
    window = text[:limit]
    for index in range(len(window) - 1, 0, -1):
        if window[index] == " " and window.count("<", 0, index) == window.count(">", 0, index):
            return index + 1
    cut = limit
    opened = max(window.rfind("<"), window.rfind("&"))
    if opened > 0 and opened > max(window.rfind(">"), window.rfind(";")):
        cut = opened
    return cut


def _split_line(line: str, limit: int) -> list[str]:
    pieces: list[str] = []
    while len(line) > limit:
        cut = _cut_point(line, limit)
        pieces.append(line[:cut].rstrip())
        line = line[cut:]
    return [*pieces, line]


def split_messages(mrkdwn: str, limit: int = CHUNK_CHARS) -> list[str]:
    """Pack paragraphs and code blocks into messages of at most `limit` characters."""
    chunks = [
        c.strip("\n") for c in split_keeping_code_blocks(mrkdwn, limit, cut_line=_split_line, min_fill=0.0)
    ]
    if len(chunks) > MAX_MESSAGES:
        dropped = sum(len(c) for c in chunks[MAX_MESSAGES - 1 :])
        chunks = [*chunks[: MAX_MESSAGES - 1], neutralise(texts.ANSWER_CUT.format(chars=dropped))]
    return chunks


def format_for_slack(markdown: str, limit: int = CHUNK_CHARS) -> list[str]:
    """The model's Markdown -> the mrkdwn messages to post, in order (empty for empty text)."""
    return split_messages(to_mrkdwn(markdown), limit)


# --- blocks and streamed Markdown -----------------------------------------------------------

FEEDBACK_ACTION_ID = "codebot_feedback"  # the feedback buttons' action (bot/slack/feedback.py)
SECTION_CHARS = 2_900  # a section block holds 3,000 characters of text
_MENTION_OPENER = re.compile(r"(<|&lt;)(?=[!@#])")
_MD_LINK_TARGET = re.compile(
    r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]"
    r"\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?(?:\s+\"[^\"\n]*\")?\s*\)"
)


def text_blocks(mrkdwn: str) -> list[dict[str, object]]:
    """One message's mrkdwn as section blocks (what a reader sees when blocks are sent)."""
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": part}}
        for part in split_messages(mrkdwn, SECTION_CHARS)
        if part.strip()
    ]


def safe_markdown(markdown: str) -> str:
    """Standard Markdown as a chat stream sends it (`markdown_text`), inert like a post: nothing
    can form a Slack control sequence (`<!here>`, `<@U…>`, `<#C…>`, escaped or not), a literal
    @here/@channel/@everyone cannot notify, and a link with another scheme than http(s) or
    mailto is shown as text. Local: the text of a prefix is a prefix of the text of the whole,
    as long as no link is cut (worker/agent/live_text.py holds open links back)."""

    def link(match: re.Match[str]) -> str:
        url = match.group(3)
        if _safe_url(url) is not None:
            return match.group(0)
        return f"{match.group(2)} ({url})"

    text = _MD_LINK_TARGET.sub(link, markdown)
    text = _MENTION_OPENER.sub(lambda m: m.group(1) + _WORD_JOINER, text)
    return _BROADCAST.sub(lambda m: "@" + _WORD_JOINER + m.group(1), text)


def feedback_block(question_id: str) -> dict[str, Any]:
    """The block that ends an answer: Slack's thumbs up / thumbs down buttons."""

    def button(text: str, label: str, value: str) -> dict[str, Any]:
        return {"text": {"type": "plain_text", "text": text}, "accessibility_label": label, "value": value}

    return {
        "type": "context_actions",
        # Slack wants a new block_id for each version of a message
        "block_id": f"codebot_feedback_{uuid.uuid4().hex[:12]}",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": FEEDBACK_ACTION_ID,
                "positive_button": button("👍", texts.FEEDBACK_UP_LABEL, f"up:{question_id}"),
                "negative_button": button("👎", texts.FEEDBACK_DOWN_LABEL, f"down:{question_id}"),
            }
        ],
    }
