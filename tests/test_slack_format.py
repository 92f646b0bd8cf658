"""Markdown -> Slack mrkdwn, and splitting into messages: pure functions."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.slack.format import CHUNK_CHARS, MAX_MESSAGES, format_for_slack, split_messages, to_mrkdwn


def test_links_bold_italics_strikes_and_headings_become_mrkdwn() -> None:
    markdown = "# Retry logic\nThe **retry** loop [job.py#L3](https://x.io/a_(b)?q=1&r=2) is *slow* ~~fast~~."
    assert to_mrkdwn(markdown) == (
        "*Retry logic*\nThe *retry* loop <https://x.io/a_(b)?q=1&amp;r=2|job.py#L3> is _slow_ ~fast~."
    )


def test_code_fences_are_kept_without_their_language_and_their_text_is_escaped() -> None:
    markdown = "See:\n```python\nif a < b and c > d & e:\n    pass\n```\nand `x <y>`."
    assert (
        to_mrkdwn(markdown)
        == "See:\n```\nif a &lt; b and c &gt; d &amp; e:\n    pass\n```\nand `x &lt;y&gt;`."
    )


def test_an_unclosed_code_fence_is_closed() -> None:
    assert to_mrkdwn("```\nprint(1)") == "```\nprint(1)\n```"


def test_no_broadcast_or_mention_survives_from_model_or_repo_text() -> None:
    loud = "<!channel> <!here> <!everyone> <@U123> <!subteam^S1|devs> @here @Channel @everyone"
    for text in (loud, f"`{loud}`", f"```\n{loud}\n```", f"[{loud}](https://x.io)", f"# {loud}"):
        out = to_mrkdwn(text)
        assert "<!" not in out and "<@" not in out
        assert "@here" not in out and "@Channel" not in out and "@everyone" not in out


def test_links_with_unsafe_schemes_are_not_linked() -> None:
    assert to_mrkdwn("[click](javascript:alert(1))") == "click (javascript:alert(1))"
    assert to_mrkdwn("[ping](!here)") == "ping (!here)"


def test_lists_quotes_and_rules_read_well_in_slack() -> None:
    assert (
        to_mrkdwn("- one\n  * two\n> quoted **bold**\n---") == "• one\n  • two\n> quoted *bold*\n──────────"
    )


def test_a_long_reply_is_split_on_paragraphs_and_a_cut_code_block_is_closed_and_reopened() -> None:
    code = "```\n" + "\n".join(f"line {i}" for i in range(1000)) + "\n```"
    chunks = split_messages(to_mrkdwn("Intro paragraph.\n\n" + code + "\n\nOutro."))
    assert len(chunks) > 2
    assert all(len(c) <= CHUNK_CHARS for c in chunks)
    assert chunks[0] == "Intro paragraph."
    assert all(c.startswith("```\n") and c.endswith("\n```") for c in chunks[1:-1])
    assert chunks[-1].endswith("```\n\nOutro.")
    assert sum(c.count("\nline ") for c in chunks) == 1000


def test_an_overlong_line_is_cut_between_words_never_inside_a_link_or_entity() -> None:
    line = " ".join(["word &amp; <https://example.com/a|a link>"] * 400)
    chunks = split_messages(line, limit=500)
    assert all(len(c) <= 500 for c in chunks)
    assert all(c.count("<") == c.count(">") and c.count("&") == c.count("&amp;") for c in chunks)


def test_an_absurdly_long_answer_is_cut_after_the_last_message_with_a_notice() -> None:
    chunks = format_for_slack("\n\n".join("word " * 600 for _ in range(100)))
    assert len(chunks) == MAX_MESSAGES
    assert chunks[-1].startswith("(The answer was cut here:")


# no deadline and no too_slow health check: both are wall-clock, and fail on a busy machine
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.text(max_size=400), st.just("```"), st.just("```python"), st.just("a ``` b"), st.just("")
        ),
        max_size=60,
    )
)
def test_every_chunk_fits_and_balances_its_fences(lines: list[str]) -> None:
    chunks = format_for_slack("\n".join(lines), limit=300)
    assert all(0 < len(c) <= 300 for c in chunks)
    assert all(c.count("```") % 2 == 0 for c in chunks)
