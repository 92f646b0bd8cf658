"""The live view of a streamed Slack answer: `SlackLiveView`, made by `SlackStreamSink.live`
(bot/slack/stream.py, whose docstring says what a stream shows and when it falls back). Its
sender thread does every Web API call of the stream (startStream, appendStream, the loading
status), so Slack's latency and rate limits never slow the model down."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot import texts
from bot.slack.format import safe_markdown
from bot.slack.sink import SLACK_FAILURES, STREAM_OVER_ERRORS, is_transient, stop_stream
from config.settings import Settings
from worker.agent.live_text import LiveText
from worker.jobs.question import ReplyTarget
from worker.jobs.sink import Answer

log = logging.getLogger("codebot.slack.stream")

START_TRIES = 3  # a stream that cannot be opened after this many transient failures: placeholder instead
TITLE_MAX_CHARS = 150
STATUS_THINKING = "is thinking…"
STATUS_READING = "is reading the code…"
STATUS_REFRESH_SECONDS = 90.0  # Slack clears a status after 2 minutes without a message


class StreamingSink(Protocol):
    """What a view needs of its sink (bot/slack/stream.py `SlackStreamSink`)."""

    client: WebClient
    settings: Settings
    target: ReplyTarget
    asker: str

    @property
    def thread(self) -> str | None: ...

    def progress(self, text: str) -> None: ...

    def claim_stream(self, ts: str) -> bool: ...

    def remember_refusal(self, error: str) -> bool: ...


@dataclass
class _Text:
    """Text ready to go out, and what the turn will have sent once it has."""

    chunk: dict[str, Any]
    turn_sent: str


class SlackLiveView:
    """worker.jobs.live.LiveView on a Slack chat stream; one sender thread per question does
    every call (also the fallback's progress lines), so nothing here is called concurrently."""

    def __init__(self, sink: StreamingSink, text: LiveText) -> None:
        self.sink = sink
        self.client = sink.client
        self.text = text
        self.settings = sink.settings
        self.channel = sink.target.channel
        self.thread = sink.thread or ""
        self.ts: str | None = None
        self.sent = ""  # the markdown streamed so far, every turn
        self.streaming = False  # a stream is open and takes appends
        self.fallback = False  # Slack refused streaming: progress lines instead
        self._turn = 0
        self._turn_sent = ""  # safe markdown sent for the current turn
        self._frozen_turn = -1  # a turn whose text stopped extending what was sent
        self._full = False  # slack_stream_max_chars reached
        self._tasks: list[dict[str, Any]] = []  # task_update chunks waiting to be sent
        self._titles: dict[str, str] = {}
        self._progress: str | None = None  # the fallback's progress line waiting to be shown
        self._status_wanted = ""
        self._status_shown = ""
        self._status_at = float("-inf")
        self._statuses_work = True
        self._text_due = float("-inf")  # when text may go out again (pacing)
        self._failures = 0
        self._lock = threading.Condition()
        self._dirty = False  # the LiveText has more than was looked at
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="slack-stream", daemon=True)
        self._thread.start()

    # --- LiveView (the agent's thread) --------------------------------------------------------
    def thinking(self) -> None:
        with self._lock:
            self._status_wanted = STATUS_THINKING
            self._lock.notify()

    def text_changed(self) -> None:
        with self._lock:
            self._dirty = True
            self._lock.notify()

    def waiting(self, line: str) -> None:
        """The model's reply is awaited: the loading status says how far it got (Slack shows the
        status "codebot is waiting for the model: prompt 2,048 of 3,874 tokens read")."""
        with self._lock:
            self._status_wanted = f"is {line[:TITLE_MAX_CHARS]}…"
            if self.fallback:
                self._progress = line[:TITLE_MAX_CHARS]
            self._lock.notify()

    def tool_started(self, call_id: str, title: str) -> None:
        title = safe_markdown(title)[:TITLE_MAX_CHARS] or "…"
        with self._lock:
            self._titles[call_id] = title
            self._status_wanted = STATUS_READING
            if self.fallback:
                self._progress = title
            else:
                self._tasks.append(
                    {"type": "task_update", "id": call_id, "title": title, "status": "in_progress"}
                )
            self._lock.notify()

    def tool_finished(self, call_id: str, ok: bool, failure: str = "") -> None:
        with self._lock:
            title = self._titles.get(call_id)
            if title is None:
                return
            if not ok and failure:  # the card names what failed, never "searching" as if it did
                title = safe_markdown(failure)[:TITLE_MAX_CHARS] or title
            if self.fallback:
                if not ok and failure:
                    self._progress = title
                    self._lock.notify()
                return
            status = "complete" if ok else "error"
            self._tasks.append({"type": "task_update", "id": call_id, "title": title, "status": status})
            self._lock.notify()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=60)

    # --- the end (the job's thread, after close) -----------------------------------------------
    def rest_of(self, answer: Answer) -> str | None:
        """What the stream still lacks to read as `answer`, or None when it cannot end as that
        answer (no stream, or it showed something else, or the answer is too long for it)."""
        if not self.streaming or self.ts is None:
            return None
        whole = safe_markdown(answer.markdown)
        if not whole.startswith(self.sent) or len(whole) > self.settings.slack_stream_max_chars:
            return None
        return whole[len(self.sent) :]

    def finish(self, rest: str, blocks: list[dict[str, Any]]) -> None:
        """The stream's last call: task cards not sent yet, the rest of the answer, `blocks`."""
        assert self.ts is not None
        chunks = self._tasks + ([{"type": "markdown_text", "text": rest}] if rest else [])
        self.client.chat_stopStream(channel=self.channel, ts=self.ts, chunks=chunks or None, blocks=blocks)
        self.streaming = False

    def end_with_cards(self) -> None:
        """End a stream that will not show the answer (an apology follows, or an answer it cannot
        hold) with its task cards not sent yet: a card whose call finished just before the run
        ended (the sender thread stops at close) would otherwise stay "in progress" for good."""
        if not self.streaming or self.ts is None or not self._tasks:
            return
        try:
            self.client.chat_stopStream(channel=self.channel, ts=self.ts, chunks=self._tasks)
        except SLACK_FAILURES as exc:  # the message is replaced next, which stops it anyway
            log.info("slack stream: the last task cards could not be sent: %s", exc)
        self._tasks = []
        self.streaming = False

    # --- the sender thread ---------------------------------------------------------------------
    def _ready(self, now: float) -> bool:
        status = self._statuses_work and (
            self._status_wanted != self._status_shown
            or (self._status_shown and now - self._status_at > STATUS_REFRESH_SECONDS)
        )
        text = self._dirty and now >= self._text_due and not self.fallback
        return self._closed or bool(self._tasks) or self._progress is not None or text or bool(status)

    def _timeout(self, now: float) -> float | None:
        waits = []
        if self._dirty and not self.fallback:
            waits.append(self._text_due - now)
        if self._status_shown and self._statuses_work:
            waits.append(self._status_at + STATUS_REFRESH_SECONDS - now)
        return max(0.0, min(waits)) if waits else None

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._ready(time.monotonic()):
                    self._lock.wait(self._timeout(time.monotonic()))
                if self._closed:
                    break
                with_text = self._dirty and time.monotonic() >= self._text_due
                if with_text:
                    self._dirty = False
                tasks, self._tasks = self._tasks, []
                progress, self._progress = self._progress, None
            try:
                self._send(tasks, with_text, progress)
            except Exception:
                log.warning("slack stream: sending failed; the answer will replace it", exc_info=True)
                self.streaming = False
        self._clear_status()

    def _send(self, tasks: list[dict[str, Any]], with_text: bool, progress: str | None) -> None:
        self._update_status()
        if self.fallback:
            if progress is not None:
                self.sink.progress(progress)
            return
        text = self._text() if with_text else None
        chunks = tasks + ([text.chunk] if text else [])
        if not chunks:
            return
        if self.ts is None:
            self._start(chunks, text)
        elif self.streaming:
            self._append(chunks, text)

    def _text(self) -> _Text | None:
        """The text that can go out now, or None (nothing new, frozen or full)."""
        if self._full:
            return None
        shown = self.text.snapshot()
        if shown.turn != self._turn:
            self._turn, self._turn_sent = shown.turn, ""
        if shown.turn == self._frozen_turn:
            return None
        markdown = safe_markdown(shown.markdown)
        if not markdown.startswith(self._turn_sent):
            log.info("slack stream: turn %d changed what it showed; the answer will replace it", shown.turn)
            self._frozen_turn = shown.turn
            return None
        delta = markdown[len(self._turn_sent) :]
        if not delta:
            return None
        piece = ("\n\n" if self.sent and not self._turn_sent else "") + delta
        if len(self.sent) + len(piece) > self.settings.slack_stream_max_chars:
            self._full = True
            return None
        return _Text({"type": "markdown_text", "text": piece}, markdown)

    def _sent(self, text: _Text | None) -> None:
        if text is not None:
            self.sent += text.chunk["text"]
            self._turn_sent = text.turn_sent
            self._text_due = time.monotonic() + self.settings.slack_stream_interval_seconds

    def _again(self, chunks: list[dict[str, Any]], text: _Text | None) -> None:
        """A call that failed for now: its task cards and its text go with the next one."""
        with self._lock:
            self._tasks[:0] = [c for c in chunks if c["type"] == "task_update"]
            self._dirty = self._dirty or text is not None
            self._text_due = time.monotonic() + self.settings.slack_stream_interval_seconds

    def _start(self, chunks: list[dict[str, Any]], text: _Text | None) -> None:
        target = self.sink.target
        recipient = (
            {} if target.is_dm else {"recipient_user_id": self.sink.asker, "recipient_team_id": target.team}
        )
        try:
            response = self.client.chat_startStream(
                channel=self.channel, thread_ts=self.thread, chunks=chunks, **recipient
            )
        except SLACK_FAILURES as exc:
            self._start_refused(exc, chunks, text)
            return
        ts = str(response["ts"])
        if not self.sink.claim_stream(ts):  # another run of this question answers in its message
            try:
                stop_stream(client=self.client, channel=self.channel, ts=ts)
                self.client.chat_delete(channel=self.channel, ts=ts)
            except SLACK_FAILURES as exc:
                log.warning("slack stream: could not remove a second stream: %s", exc)
            self._fall_back(chunks)
            return
        self.ts, self.streaming = ts, True
        self._sent(text)

    def _start_refused(self, exc: Exception, chunks: list[dict[str, Any]], text: _Text | None) -> None:
        error = exc.response.get("error") if isinstance(exc, SlackApiError) else None
        refused_here = error is not None and self.sink.remember_refusal(str(error))  # "not here"
        if not refused_here and is_transient(exc) and self._failures + 1 < START_TRIES:
            self._failures += 1
            self._again(chunks, text)
            return
        if not refused_here:
            log.warning("slack stream: chat.startStream failed (%s); progress edits instead", error or exc)
        self._fall_back(chunks)

    def _fall_back(self, chunks: list[dict[str, Any]]) -> None:
        self.fallback = True
        titles = [c["title"] for c in chunks if c["type"] == "task_update"]
        self.sink.progress(titles[-1] if titles else texts.QUEUED)

    def _append(self, chunks: list[dict[str, Any]], text: _Text | None) -> None:
        assert self.ts is not None
        try:
            self.client.chat_appendStream(channel=self.channel, ts=self.ts, chunks=chunks)
        except SLACK_FAILURES as exc:
            error = exc.response.get("error") if isinstance(exc, SlackApiError) else None
            if error in STREAM_OVER_ERRORS or not is_transient(exc):
                log.info("slack stream: chat.appendStream refused (%s); the answer will replace it", error)
                self.streaming = False
            else:
                self._again(chunks, text)
            return
        self._sent(text)

    # --- loading states ------------------------------------------------------------------------
    def _update_status(self) -> None:
        with self._lock:
            wanted = self._status_wanted
        stale = time.monotonic() - self._status_at > STATUS_REFRESH_SECONDS
        if self._statuses_work and (wanted != self._status_shown or (wanted and stale)):
            self._set_status(wanted)

    def _set_status(self, status: str) -> None:
        try:
            self.client.assistant_threads_setStatus(
                channel_id=self.channel, thread_ts=self.thread, status=status
            )
        except SLACK_FAILURES as exc:
            if not is_transient(exc):  # not allowed here (scope, channel): no loading states
                self._statuses_work = False
            log.info("slack: setStatus failed: %s", exc)
        self._status_shown, self._status_at = status, time.monotonic()

    def _clear_status(self) -> None:
        if self._status_shown and self._statuses_work:
            self._set_status("")
