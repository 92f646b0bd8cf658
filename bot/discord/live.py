"""Discord answers that appear as they are written: the progress message edited as the text grows.

`DiscordLiveView` is the Discord sink's live view (worker/jobs/live.py). It runs an event loop
of its own in a thread, with its own REST session (one `GET /users/@me` more per question), so
Discord's latency and rate limits never slow the model: the agent only records what changed.

- While tools run the "codebot is typing…" indicator is on (refreshed every `TYPING_SECONDS`
  while a tool runs; Discord shows it ~10 s). A tool still running after
  `discord_step_line_after_seconds` is also named in the message ("reading `retry.py`…").
  Quicker tools (the usual: milliseconds) are not: an edit spent on them would hold back the
  answer's first text for the rest of the edit interval, which is what a user waits for.
- While a model reply is awaited, the message shows the waiting line ("waiting for the model:
  prompt 2,048 of 3,874 tokens read", "writing, 412 tokens", worker/agent/waiting.py), within
  the same edit budget.
- Once the model writes its answer, the message shows the text so far (the LiveText's stable
  part: redacted, citations checked, worker/agent/live_text.py) followed by `…`, cut to one
  message; links show no preview cards, as in the final answer.
- At most one edit per `discord_edit_interval_seconds` (Discord limits edits per message);
  what changes meanwhile goes in the next edit. A 429 is honoured by discord.py, which waits
  the `retry_after` Discord sends before it tries again (bot/discord/rest.py).
- `close()` stops the sender; the sink's `answer()` then edits the same message into the first
  part of the stored answer (and posts the rest), `failed()` into the apology.
Every edit carries `allowed_mentions` that parse nothing, like every post.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable

from bot import texts
from bot.discord.format import MESSAGE_CHARS, one_message, split_message, suppress_link_previews
from bot.discord.rest import DiscordRest
from config.settings import Settings
from worker.agent.live_text import LiveText

log = logging.getLogger("codebot.discord.live")

TYPING_SECONDS = 8.0  # Discord shows typing for ~10 s after each call
WRITING_MARK = " …"
LIVE_CHARS = MESSAGE_CHARS - 100  # room for the mark and a closed code fence


def live_content(markdown: str, step: str | None) -> str:
    """What the message shows now: the text so far, else what the bot is doing."""
    if markdown.strip():
        first = split_message(suppress_link_previews(markdown), LIVE_CHARS)[0]
        return first + WRITING_MARK
    return one_message(texts.PROGRESS.format(step=step)) if step else ""


class DiscordLiveView:
    """worker.jobs.live.LiveView editing one Discord message (the module's docstring says how).

    The agent's thread only posts what happened onto the view's loop; all state below is the
    loop's, so the sender reads it without locks."""

    def __init__(self, settings: Settings, channel: str, message: str, text: LiveText) -> None:
        assert settings.discord_bot_token is not None
        self.channel = channel
        self.message = message
        self.text = text
        self.interval = settings.discord_edit_interval_seconds
        self.step_after = settings.discord_step_line_after_seconds
        self._rest = DiscordRest(
            settings.discord_bot_token.get_secret_value(), settings.discord_max_ratelimit_wait_seconds
        )
        self._step: str | None = None  # the latest tool that ran long enough to be named, or failed
        self._running: dict[str, tuple[str, float]] = {}  # call id -> (title, when it started)
        self._shown = ""
        self._edited_at = float("-inf")
        self._typing_at = float("-inf")
        self._typing_wanted = False  # a tool started since the indicator was last refreshed
        self._loop = asyncio.new_event_loop()
        self._changed = asyncio.Event()
        self._closed = False
        self._task: concurrent.futures.Future[None] | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="discord-live", daemon=True)
        self._thread.start()
        self._task = asyncio.run_coroutine_threadsafe(self._run(), self._loop)

    # --- LiveView (the agent's thread) --------------------------------------------------------
    def _poke(self, change: Callable[[], None] | None = None) -> None:
        def apply() -> None:
            if change is not None:
                change()
            self._changed.set()

        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(apply)

    def thinking(self) -> None:
        self._poke()

    def text_changed(self) -> None:
        self._poke()

    def waiting(self, line: str) -> None:
        """The model's reply is awaited: the message says how far it got, until text comes."""

        def show() -> None:
            self._step = line

        self._poke(show)

    def tool_started(self, call_id: str, title: str) -> None:
        started = time.monotonic()

        def start() -> None:
            self._running[call_id] = (title, started)
            self._typing_wanted = True

        self._poke(start)

    def tool_finished(self, call_id: str, ok: bool, failure: str = "") -> None:
        def finish() -> None:
            self._running.pop(call_id, None)
            if not ok and failure:  # a failed call is named as failed, however quick it was
                self._step = failure

        self._poke(finish)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._poke()
        if self._task is not None:
            try:
                self._task.result(timeout=60)
            except Exception:
                log.warning("discord live view: the sender did not stop cleanly", exc_info=True)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    # --- the sender (its own loop) -------------------------------------------------------------
    async def _run(self) -> None:
        try:
            await self._rest.open()
            while not self._closed:
                await self._next_change()
                if self._closed:
                    break
                await self._typing()
                if self._content() == self._shown:
                    continue  # e.g. a quick tool came and went: typing only, the edit budget kept
                wait = self.interval - (time.monotonic() - self._edited_at)
                if wait > 0:
                    await asyncio.sleep(wait)
                    if self._closed:
                        break
                await self._edit()
        except Exception:
            log.warning("discord live view stopped; the answer will replace what it showed", exc_info=True)
        finally:
            await self._rest.close()

    async def _next_change(self) -> None:
        """Wait until the agent reports something or something falls due (`_due_in`)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), self._due_in())
        self._changed.clear()

    def _due_in(self) -> float | None:
        """Seconds until the sender has something to do unasked (a running tool's step line is
        due, or its typing indicator needs refreshing); None: nothing until the agent reports."""
        now = time.monotonic()
        dues = [started + self.step_after - now for _title, started in self._running.values()]
        if self._running:
            dues.append(self._typing_at + TYPING_SECONDS - now)
        future = [due for due in dues if due > 0]  # what is due already was done this round
        return min(future) if future else None

    def _step_now(self) -> str | None:
        """The latest tool that has been running for `step_after`, else the last one named."""
        now = time.monotonic()
        slow = [
            (started, title) for title, started in self._running.values() if now - started >= self.step_after
        ]
        if slow:
            self._step = max(slow)[1]
        return self._step

    def _content(self) -> str:
        return live_content(self.text.snapshot().markdown, self._step_now())

    async def _typing(self) -> None:
        """The indicator on while a tool runs, also one that came and went since the last look."""
        now = time.monotonic()
        wanted, self._typing_wanted = self._typing_wanted or bool(self._running), False
        if wanted and now - self._typing_at >= TYPING_SECONDS:  # else the last call still shows
            self._typing_at = now
            try:
                await self._rest.typing(self.channel)
            except Exception as exc:  # cosmetic
                log.info("discord typing indicator failed: %s", exc)

    async def _edit(self) -> None:
        content = self._content()
        if not content or content == self._shown:
            return
        try:
            await self._rest.edit(self.channel, self.message, content)
        finally:  # the interval runs from when Discord answered: edits arrive at least that far apart
            self._edited_at = time.monotonic()
        self._shown = content
