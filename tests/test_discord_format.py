"""Pure Discord formatting: message splitting, the Sources embed, nonces, names."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.discord.app import invite_url
from bot.discord.format import (
    EMBED_DESCRIPTION_CHARS,
    MAX_ANSWER_MESSAGES,
    MESSAGE_CHARS,
    message_nonce,
    render_answer,
    sources_embed,
    split_message,
    strip_mentions_of,
    suppress_link_previews,
    thread_name,
)
from worker.agent.citations import Source
from worker.jobs.sink import Answer

FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)


def fences_balanced(chunk: str) -> bool:
    """Every code block opened in the chunk is closed in it (CommonMark: a closing fence is the
    same character, at least as long, with nothing after it)."""
    opener: str | None = None
    for line in chunk.split("\n"):
        match = FENCE_LINE.match(line)
        if not match:
            continue
        marker = match.group(1)
        if opener is None:
            opener = marker
        elif (
            marker[0] == opener[0] and len(marker) >= len(opener) and not line.strip()[len(marker) :].strip()
        ):
            opener = None
    return opener is None


def test_a_short_text_is_one_message_unchanged() -> None:
    assert split_message("Hello **world**.\n\n```py\nx = 1\n```") == ["Hello **world**.\n\n```py\nx = 1\n```"]


def test_a_code_block_cut_in_two_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"line_{i} = {i}" for i in range(400))
    chunks = split_message(f"Intro.\n\n```python\n{code}\n```\n\nOutro.")
    assert len(chunks) >= 3
    assert all(len(c) <= MESSAGE_CHARS and fences_balanced(c) for c in chunks)
    assert all(c.startswith("```python\n") for c in chunks[1:-1])
    body = [line for c in chunks for line in c.split("\n") if line.startswith("line_")]
    assert body == code.split("\n")  # nothing lost, nothing doubled


def test_breaks_fall_between_paragraphs_when_they_can() -> None:
    paragraph = "word " * 150  # ~750 characters
    chunks = split_message("\n\n".join([paragraph.strip()] * 6))
    assert all(chunk.endswith("word") and chunk.startswith("word") for chunk in chunks)


def test_a_line_longer_than_a_message_is_cut_at_spaces() -> None:
    chunks = split_message("x" * 10 + " " + "y " * 3000)
    assert all(len(c) <= MESSAGE_CHARS for c in chunks)
    assert "".join(chunks).replace("\n", " ").count("y") == 3000


# no deadline and no too_slow health check: both are wall-clock, and fail on a busy machine
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(st.text(max_size=300), st.sampled_from(["```", "```js", "~~~", "", "    ```"])), max_size=80
    )
)
def test_any_text_splits_into_messages_within_the_limit_with_balanced_fences(lines: list[str]) -> None:
    text = "\n".join(lines)
    chunks = split_message(text, limit=500)
    assert all(len(c) <= 500 and fences_balanced(c) for c in chunks)


def test_sources_move_into_an_embed_and_links_show_no_preview() -> None:
    source = Source(
        "payments",
        "retry.py",
        6,
        12,
        "https://github.com/a/p/blob/abc/retry.py#L6-L12",
        "payments:retry.py#L6-L12",
    )
    markdown = (
        "It backs off [payments:retry.py#L6-L12](https://github.com/a/p/blob/abc/retry.py#L6-L12).\n\n"
        "**Sources**\n- [payments:retry.py#L6-L12](https://github.com/a/p/blob/abc/retry.py#L6-L12)\n"
        "_1 citation could not be verified against the code read and is not linked._"
    )
    rendered = render_answer(Answer(markdown=markdown, sources=[source]))
    assert rendered.chunks == [
        "It backs off [payments:retry.py#L6-L12](<https://github.com/a/p/blob/abc/retry.py#L6-L12>).\n\n"
        "_1 citation could not be verified against the code read and is not linked._"
    ]
    assert rendered.embed == {
        "type": "rich",
        "title": "Sources",
        "description": f"• [{source.label}]({source.url})",
    }


def test_a_huge_sources_list_stays_within_the_embed_limits() -> None:
    sources = [
        Source("r", f"f{i}.py", 1, 2, f"https://x.test/{'p' * 80}/{i}", f"r:f{i}.py#L1-L2")
        for i in range(200)
    ]
    embed = sources_embed(sources)
    assert embed is not None
    assert len(embed["description"]) <= EMBED_DESCRIPTION_CHARS
    assert embed["description"].endswith("more")


def test_an_endless_answer_is_cut_to_ten_messages_with_a_notice() -> None:
    rendered = render_answer(Answer(markdown="\n\n".join(["para " * 300] * 60)))
    assert len(rendered.chunks) == MAX_ANSWER_MESSAGES
    assert "the rest was cut" in rendered.chunks[-1]
    assert all(len(c) <= MESSAGE_CHARS for c in rendered.chunks)


def test_links_inside_code_are_left_alone() -> None:
    text = "[a](https://x.test)\n```\n[b](https://y.test)\n```"
    assert suppress_link_previews(text) == "[a](<https://x.test>)\n```\n[b](https://y.test)\n```"


def test_nonces_are_deterministic_distinct_and_at_most_25_characters() -> None:
    question = "q-discord-" + "9" * 110
    nonces = {message_nonce(question, slot) for slot in ("p", "f", *(f"a{i}" for i in range(10)))}
    assert len(nonces) == 12
    assert all(len(n) <= 25 for n in nonces)
    assert message_nonce(question, "a3") == message_nonce(question, "a3")


def test_only_the_bots_own_mention_is_removed_from_the_question() -> None:
    assert strip_mentions_of(
        "<@123456789012345678> where is <@!111111111111111111> retry?", 123456789012345678
    ) == ("where is <@!111111111111111111> retry?")
    assert strip_mentions_of("<@!123456789012345678>  hi", 123456789012345678) == "hi"


def test_thread_names_are_one_line_of_at_most_100_characters() -> None:
    assert thread_name("how does\n retry   work?") == "how does retry work?"
    assert len(thread_name("x" * 300)) == 100
    assert thread_name("   ") == "codebot answer"


def test_the_invite_url_asks_for_both_scopes_and_the_documented_permissions() -> None:
    assert invite_url(123456789012345678) == (
        "https://discord.com/oauth2/authorize?client_id=123456789012345678"
        "&scope=bot+applications.commands&permissions=309237730368"
    )
