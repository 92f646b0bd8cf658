"""A local stand-in for the Slack Web API, and signed Events API / slash-command requests.

As in slack-bolt's own tests, the real clients talk HTTP to a real server on loopback::

    with SlackAPI() as slack:
        client = WebClient(token="xoxb-test", base_url=slack.url)
        client.chat_postMessage(channel="C1", text="hi")
        assert slack.calls_to("chat.postMessage")[0].body["text"] == "hi"
        slack.rate_limit("chat.update", count=1, retry_after=1)  # the next call gets a 429
        slack.outage("http500")                  # every Web API call fails until outage(None)
        slack.hang("chat.update", 30, containing="answer")  # the next such call answers 30 s late

Every call is recorded (method, body parsed from JSON or form, headers, arrival time).
Messages posted and updated are kept per channel so tests can read a thread as a user sees
it (`thread_texts`). Requests without `Authorization: Bearer xoxb-…` get `invalid_auth`.
Outages, as Slack has them: `outage("http500")` (HTTP 500, an HTML page), `outage("ratelimited")`
(HTTP 200 `{"ok": false, "error": "ratelimited"}`) or `outage("429")` (HTTP 429, Retry-After)
on every Web API method, or on some, until `outage(None)`. `hang` holds one call (then
handles it as usual: Slack was slow, not down), as when a worker is killed mid-post.
Slash commands' `response_url` points here too (`response_url(n)`), recorded as "response_url".
With `socket_url` set (a `SlackSocket`'s URL), `apps.connections.open` with an app-level token
(`Bearer xapp-…`) answers `{"ok": true, "url": socket_url}`; otherwise it gets `invalid_auth`.
Files (`file(name, data)`: a Slack file object) are served at their `url_private_download`
under this server's base (`/files-pri/…`), 403 without `Bearer xoxb-…`; `files.fail(url,
404)`, `files.hang(url)`, `files.requests` (tests/support/file_host.py).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode

from slack_sdk.signature import SignatureVerifier

from tests.support.file_host import FileStore, send
from tests.support.slack_surfaces import Posted, Surfaces

Outage = Literal["http500", "ratelimited", "429"]
FILES_PATH = "/files-pri/"
BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"
TEAM_ID = "T0001"


@dataclass
class Call:
    method: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # a real server's backlog: the worker asks several calls at once
    api: SlackAPI


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        if self.path.startswith(FILES_PATH):
            send(self, *self.server.api.files.answer(self.path, dict(self.headers.items())))
            return
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8")
        if "json" in (self.headers.get("Content-Type") or ""):
            body = json.loads(raw or "{}")
        else:
            body = dict(parse_qsl(raw))
        path = self.path.partition("?")[0]
        method = "response_url" if path.startswith("/response/") else path.rsplit("/", 1)[-1]
        status, payload, headers = self.server.api._handle(method, body, dict(self.headers.items()))
        html = isinstance(payload, str)  # a 5xx page from Slack's edge, not JSON
        data = payload.encode() if html else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/html" if html else "application/json; charset=utf-8")
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the caller is gone (a killed worker whose call was held by hang())
            pass

    do_GET = do_POST


class SlackAPI:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.messages: list[Posted] = []
        self._lock = threading.Lock()
        self._ts = itertools.count(1)
        self._limits: dict[str | None, list[int]] = {}  # method (None: any) -> [count left, retry_after]
        self._failures: dict[str, list[Any]] = {}  # method -> [count left, error]
        self._outage: tuple[Outage, frozenset[str] | None, int] | None = None  # kind, methods, retry_after
        # (method, seconds, text it contains, an event that ends the hold sooner)
        self._hangs: list[tuple[str, float, str | None, threading.Event | None]] = []
        self.held: list[Call] = []  # calls hang() held, as they arrived
        self.released: list[Call] = []  # held calls whose hold is over (then handled as usual)
        self.handled: list[Call] = []  # every call, in the order Slack acted on it (a held one: late)
        self.socket_url: str | None = None  # what apps.connections.open answers (Socket Mode)
        self.threads: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (channel, root ts): seed_thread
        self.users: dict[str, str] = {}  # user id -> display name, for users.info
        self.surfaces = Surfaces(self.messages, self._ts)  # streaming, Assistant, blocks, modals
        self.files = FileStore(token_prefix="Bearer xoxb-")  # what url_private_download serves
        self._file_ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.api = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        """The Web API base URL for WebClient(base_url=…) and SLACK_API_URL."""
        return self.base + "/api/"

    def response_url(self, n: int = 1) -> str:
        return f"{self.base}/response/{n}"

    def close(self) -> None:
        self.files.close()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> SlackAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what tests ask --------------------------------------------------------------------------

    def rate_limit(self, method: str | None = None, count: int = 1, retry_after: int = 1) -> None:
        """Answer the next `count` calls (of `method`, or of any method) with 429 Retry-After."""
        with self._lock:
            self._limits[method] = [count, retry_after]

    def fail(self, method: str, error: str, count: int = 1) -> None:
        """Answer the next `count` calls of `method` with `{"ok": false, "error": error}`."""
        with self._lock:
            self._failures[method] = [count, error]

    def outage(self, kind: Outage | None, methods: list[str] | None = None, retry_after: int = 1) -> None:
        """From now on every Web API call (of `methods`, or all) fails as in one of Slack's outages,
        until `outage(None)`: "http500" (HTTP 500, an HTML page), "ratelimited" (HTTP 200,
        `ok: false`), "429" (HTTP 429 with `Retry-After: retry_after`)."""
        with self._lock:
            self._outage = (
                None if kind is None else (kind, frozenset(methods) if methods else None, retry_after)
            )

    def hang(
        self,
        method: str,
        seconds: float,
        containing: str | None = None,
        until: threading.Event | None = None,
    ) -> None:
        """Hold the next call of `method` (whose body contains `containing`: a text, a reaction
        name) `seconds` (or until `until` is set, if sooner) before handling it as usual."""
        with self._lock:
            self._hangs.append((method, seconds, containing, until))

    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 60.0) -> list[Call]:  # a hang guard
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.calls_to(method)
            if len(found) >= count:
                return found
            time.sleep(0.01)
        raise AssertionError(
            f"expected {count} call(s) to {method}, got {len(self.calls_to(method))}: "
            f"{[c.method for c in self.calls]}"
        )

    def thread_texts(self, channel: str, thread_ts: str) -> list[str]:
        """The bot's messages in a thread, as they read now (after updates), oldest first."""
        with self._lock:
            return [m.text for m in self.messages if m.channel == channel and m.thread_ts == thread_ts]

    def message(self, channel: str, ts: str) -> Posted:
        """One of the bot's messages as it reads now (streamed or posted)."""
        with self._lock:
            found = self.surfaces.find(channel, ts)
        if found is None:
            raise AssertionError(f"no message {ts} in {channel}")
        return found

    def thread_messages(self, channel: str, thread_ts: str) -> list[Posted]:
        with self._lock:
            return [m for m in self.messages if m.channel == channel and m.thread_ts == thread_ts]

    def reactions(self, channel: str, ts: str) -> list[str]:
        """Reactions currently on a user's message (added minus removed, in the order Slack
        acted on the calls: a held call acts when its hold is over)."""
        current: list[str] = []
        with self._lock:
            handled = list(self.handled)
        for call in handled:
            if call.body.get("channel") == channel and call.body.get("timestamp") == ts:
                if call.method == "reactions.add" and call.body["name"] not in current:
                    current.append(call.body["name"])
                elif call.method == "reactions.remove" and call.body["name"] in current:
                    current.remove(call.body["name"])
        return current

    # --- the fake API --------------------------------------------------------------------------------

    def _handle(
        self, method: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, Any, dict[str, str]]:
        with self._lock:
            call = Call(method, body, headers)
            self.calls.append(call)
            held, until = self._held(method, body)
            if held:
                self.held.append(call)
        if held:
            if until is None:
                time.sleep(held)
            else:
                until.wait(held)
        with self._lock:
            if held:
                self.released.append(call)
            self.handled.append(call)
            if self._outage is not None and method != "response_url":
                kind, methods, retry_after = self._outage
                if methods is None or method in methods:
                    if kind == "http500":
                        return 500, "<html><body>500 Internal Server Error</body></html>", {}
                    if kind == "429":
                        return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after)}
                    return 200, {"ok": False, "error": "ratelimited"}, {}
            for key in (method, None):
                limit = self._limits.get(key)
                if limit and limit[0] > 0:
                    limit[0] -= 1
                    return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(limit[1])}
            failure = self._failures.get(method)
            if failure and failure[0] > 0:
                failure[0] -= 1
                return 200, {"ok": False, "error": failure[1]}, {}
            if method == "response_url":
                return 200, {"ok": True}, {}
            auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
            if method == "apps.connections.open" and self.socket_url and auth.startswith("Bearer xapp-"):
                return 200, {"ok": True, "url": self.socket_url}, {}
            if not auth.startswith("Bearer xoxb-"):
                return 200, {"ok": False, "error": "invalid_auth"}, {}
            return 200, self._answer(method, body), {}

    def _held(self, method: str, body: dict[str, Any]) -> tuple[float, threading.Event | None]:
        for index, (hung, seconds, containing, until) in enumerate(self._hangs):
            if hung == method and (containing is None or containing in json.dumps(body)):
                del self._hangs[index]
                return seconds, until
        return 0.0, None

    def _answer(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {
                "ok": True,
                "user_id": BOT_USER_ID,
                "bot_id": BOT_ID,
                "team_id": TEAM_ID,
                "user": "codebot",
            }
        if method == "chat.postMessage":
            return self.surfaces.post(body)
        if method == "chat.postEphemeral":
            ts = f"1700000000.{next(self._ts):06d}"
            return {"ok": True, "channel": body.get("channel"), "ts": ts, "message_ts": ts}
        if method == "chat.update":
            return self.surfaces.update(body)
        if method == "chat.delete":
            return self.surfaces.delete(body)
        answered = self.surfaces.answer(method, body)
        if answered is not None:
            return answered
        if method == "conversations.replies":
            return self._replies(body)
        if method == "users.info":
            name = self.users.get(str(body.get("user")))
            if name is None:
                return {"ok": False, "error": "user_not_found"}
            return {
                "ok": True,
                "user": {
                    "id": body["user"],
                    "name": name.lower(),
                    "profile": {"display_name": name, "real_name": name},
                },
            }
        return {"ok": True}

    def seed_thread(self, channel: str, messages: list[dict[str, Any]]) -> str:
        """A thread written before the bot is mentioned: `messages` as (user, text) dicts, the
        first its root; their ts are given here. Returns the root's ts."""
        root = f"1600000000.{next(self._ts):06d}"
        kept = []
        for index, item in enumerate(messages):
            ts = root if index == 0 else f"1600000000.{next(self._ts):06d}"
            kept.append({"type": "message", "ts": ts, "thread_ts": root, **item})
        self.threads[(channel, root)] = kept
        return root

    def file(self, name: str, data: bytes, mimetype: str = "text/plain", **extra: Any) -> dict[str, Any]:
        """A file someone uploaded, as Slack describes it in a message's `files`, served here."""
        file_id = f"F{next(self._file_ids):08d}"
        url = self.files.put(self.base, f"{FILES_PATH}{TEAM_ID}-{file_id}/download/{name}", data)
        kind = name.rpartition(".")[2]
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": kind,
            "size": len(data),
            "mode": "hosted",
            "is_external": False,
            "url_private": url.replace("/download/", "/"),
            "url_private_download": url,
            **extra,
        }

    def add_message(self, channel: str, item: dict[str, Any]) -> None:
        """A user's message (with `ts`, and `thread_ts` when in a thread) as conversations.replies
        gives it: in its thread, or as a message of its own."""
        root = str(item.get("thread_ts") or item["ts"])
        with self._lock:
            self.threads.setdefault((channel, root), []).append({"type": "message", **item})

    def _replies(self, body: dict[str, Any]) -> dict[str, Any]:
        """conversations.replies as Slack answers it: the root first, then replies oldest
        first, a page of `limit` at a time with a cursor. A thread not seeded has no messages."""
        thread = self.threads.get((str(body.get("channel")), str(body.get("ts"))), [])
        start = int(body.get("cursor") or 0)
        limit = int(body.get("limit") or 1000)
        page = thread[start : start + limit]
        more = start + limit < len(thread)
        meta = {"next_cursor": str(start + limit) if more else ""}
        return {"ok": True, "messages": page, "has_more": more, "response_metadata": meta}


# --- signed requests to the adapter ---------------------------------------------------------------


def signed_post(
    url: str,
    body: str,
    secret: str,
    *,
    content_type: str = "application/json",
    timestamp: int | None = None,
    extra_headers: dict[str, str] | None = None,
) -> tuple[int, str, float]:
    """POST `body` signed like Slack does; returns (status, response body, seconds taken)."""
    stamp = int(time.time()) if timestamp is None else timestamp
    signature = SignatureVerifier(secret).generate_signature(timestamp=str(stamp), body=body) or ""
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": str(stamp),
        "X-Slack-Signature": signature,
    }
    headers.update(extra_headers or {})
    request = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), time.perf_counter() - started
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), time.perf_counter() - started


_event_ids = itertools.count(1)


def event_body(event: dict[str, Any]) -> str:
    """An Events API envelope around `event` (a fresh event_id each time, as Slack does)."""
    return json.dumps(
        {
            "token": "legacy",
            "team_id": TEAM_ID,
            "api_app_id": "A0001",
            "type": "event_callback",
            "event_id": f"Ev{next(_event_ids):08d}",
            "event_time": int(time.time()),
            "event": event,
            "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
        }
    )


def mention(
    channel: str, ts: str, text: str, user: str = "U1", thread_ts: str | None = None
) -> dict[str, Any]:
    event = {
        "type": "app_mention",
        "user": user,
        "text": f"<@{BOT_USER_ID}> {text}",
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "client_msg_id": f"m-{channel}-{ts}",
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def message(
    channel: str,
    ts: str,
    text: str,
    user: str = "U1",
    thread_ts: str | None = None,
    channel_type: str = "channel",
    **extra: Any,
) -> dict[str, Any]:
    event = {
        "type": "message",
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "channel_type": channel_type,
        **extra,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def command_body(text: str, user: str = "U1", channel: str = "C1", response_url: str = "") -> str:
    return urlencode(
        {
            "token": "legacy",
            "team_id": TEAM_ID,
            "team_domain": "test",
            "channel_id": channel,
            "channel_name": "general",
            "user_id": user,
            "user_name": "someone",
            "command": "/codebot",
            "text": text,
            "response_url": response_url,
            "trigger_id": "1.2.3",
        }
    )


@contextlib.contextmanager
def slack_api() -> Iterator[SlackAPI]:
    api = SlackAPI()
    try:
        yield api
    finally:
        api.close()
