"""`codebot slack`: the bolt App, its wiring table, and the two ways Slack reaches it.

- Socket Mode when SLACK_APP_TOKEN is set: an outbound WebSocket, no public URL needed.
- HTTP otherwise: `POST /slack/events` (events, slash commands) on `--port`, served by a
  small stdlib ThreadingHTTPServer that hands each request to bolt (`App.dispatch`). Bolt's
  own `app.start()` uses a single-threaded http.server, which would make concurrent
  deliveries wait on each other's acks; this one answers each on its own thread. Bolt checks
  the signature and timestamp (401 otherwise) and answers `url_verification` itself.
  `GET /health` answers 200 for load balancers.

Every Web API client (the App's, and bolt's per-request copies) uses SLACK_API_URL and waits
out 429s as Slack's Retry-After says.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import threading
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

from slack_bolt import App, BoltRequest, BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack_handlers import SlackDeps, SlackHandlers
from bot.slack_sink import make_client
from config.errors import ConfigError
from config.settings import Settings

log = logging.getLogger("codebot.slack")

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/health"
MAX_BODY_BYTES = 1_000_000  # Slack payloads are a few KB; anything bigger is not from Slack
REQUEST_TIMEOUT_SECONDS = 30  # Slack sends a request at once; a connection idle this long is closed
_DIGITS = re.compile(r"[0-9]{1,12}")  # a Content-Length, an X-Slack-Request-Timestamp


def register(app: App, deps: SlackDeps) -> SlackHandlers:
    """The wiring table: every event and command codebot subscribes to, and its handler.

    Order matters: bolt runs the first listener that matches, and an event with no listener
    gets a 404, which Slack retries; the last line makes sure that never happens.
    """
    handlers = SlackHandlers(deps)
    app.event("app_mention")(handlers.on_app_mention)  # @codebot in a channel the app is in
    app.event("message")(handlers.on_message)  # message.im: DMs; message.channels/groups: follow-ups
    app.command("/codebot")(handlers.on_command)  # repos | help | refresh NAME|all | status
    app.event(re.compile(".*"))(handlers.ignore)  # anything else subscribed: ack, drop
    app.error(_log_error)
    return handlers


def _log_error(error: Exception, body: dict[str, Any]) -> None:
    log.error("slack listener failed on %s: %r", body.get("type") or body.get("command"), error)


class _DropEnvTokenWarning(logging.Filter):
    """Bolt reads SLACK_BOT_TOKEN from the environment by itself and then warns that the client
    we pass (on SLACK_API_URL, with retries) wins over it: true, intended, and noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


logging.getLogger("slack_bolt.App").addFilter(_DropEnvTokenWarning())


def build_app(settings: Settings, client: WebClient | None = None, executor: Executor | None = None) -> App:
    """The bolt App; `client` defaults to one on SLACK_API_URL that honours Retry-After, and
    listeners run on `executor` (default: `slack_listener_threads` threads)."""
    return App(
        client=client or make_client(settings),
        signing_secret=settings.slack_signing_secret.get_secret_value()
        if settings.slack_signing_secret
        else "",
        # Socket Mode requests are not signed; HTTP ones always are checked.
        request_verification_enabled=not settings.slack_app_token,
        token_verification_enabled=False,  # no auth.test at import; bolt calls it on the first event
        process_before_response=False,  # ack first, then run the listener on the executor
        listener_executor=executor
        or ThreadPoolExecutor(settings.slack_listener_threads, thread_name_prefix="slack-listener"),
    )


class _Handler(BaseHTTPRequestHandler):
    # Headers and body go out in separate writes; with Nagle on, each answer waits ~40 ms
    # for a delayed ACK.
    disable_nagle_algorithm = True
    server: SlackHTTPServer
    protocol_version = "HTTP/1.1"
    timeout = REQUEST_TIMEOUT_SECONDS  # a client that stalls mid-request loses its connection

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http %s", format % args)

    def do_GET(self) -> None:
        if self.path.partition("?")[0] == HEALTH_PATH:
            self._send(BoltResponse(status=200, body="ok"))
        else:
            self._send(BoltResponse(status=404, body="not found"))

    def do_POST(self) -> None:
        path, _, query = self.path.partition("?")
        if path != EVENTS_PATH:
            self._refuse(404)
            return
        declared = (self.headers.get("Content-Length") or "").strip()
        if not _DIGITS.fullmatch(declared):
            self._refuse(411 if not declared else 400)  # no framing we can trust: never read on
            return
        if int(declared) > MAX_BODY_BYTES:
            self._refuse(413)
            return
        try:
            raw = self.rfile.read(int(declared))
        except TimeoutError:
            self.close_connection = True  # a body that never came
            return
        # Bolt verifies the signature, but only after parsing the body, and it reads the timestamp
        # with int(): junk in either would end in a 500 or a dropped connection, not a refusal.
        if not _DIGITS.fullmatch(self.headers.get("X-Slack-Request-Timestamp") or ""):
            self._refuse(401)
            return
        headers: dict[str, str | Sequence[str]] = {
            k.lower(): self.headers.get_all(k) or [] for k in self.headers
        }
        try:
            request = BoltRequest(body=raw.decode("utf-8"), query=query, headers=headers)
        except (ValueError, RecursionError):  # not UTF-8, not JSON, not a form
            self._refuse(400)
            return
        self._send(self.server.app.dispatch(request))

    def _refuse(self, status: int) -> None:
        """An error answer; the connection is closed since its body may not have been read."""
        self.close_connection = True
        self._send(BoltResponse(status=status, body={"error": HTTPStatus(status).phrase.lower()}))

    def _send(self, response: BoltResponse) -> None:
        body = response.body if isinstance(response.body, str) else json.dumps(response.body)
        data = body.encode("utf-8")
        self.send_response(response.status)
        for name, values in response.headers.items():
            if name.lower() != "content-length":
                for value in values:
                    self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class SlackHTTPServer(ThreadingHTTPServer):
    """`POST /slack/events` -> bolt; one thread per connection."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, app: App, host: str = "0.0.0.0", port: int = 3000) -> None:
        self.app = app
        super().__init__((host, port), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def close(self) -> None:
        self.shutdown()
        self.server_close()


def _check(settings: Settings) -> None:
    if not settings.slack_bot_token:
        raise ConfigError(
            "SLACK_BOT_TOKEN: not set — the app's Bot User OAuth Token (xoxb-…), see docs/slack.md"
        )
    if not settings.slack_app_token and not settings.slack_signing_secret:
        raise ConfigError(
            "SLACK_SIGNING_SECRET: not set — needed in HTTP mode (or set SLACK_APP_TOKEN for Socket Mode)"
        )
    if settings.slack_app_token and not settings.slack_app_token.get_secret_value().startswith("xapp-"):
        raise ConfigError("SLACK_APP_TOKEN: must be an app-level token (xapp-…) with connections:write")


def _verify_bot_token(app: App) -> None:
    try:
        app.client.auth_test()
    except SlackApiError as exc:
        raise ConfigError(f"SLACK_BOT_TOKEN: Slack refused it ({exc.response.get('error')})") from None
    except OSError as exc:
        raise ConfigError(
            f"SLACK_API_URL: cannot reach the Slack Web API at {app.client.base_url} ({exc})"
        ) from None


def _verify_app_token(settings: Settings) -> None:
    """Ask for a Socket Mode URL once ourselves, so a refused app token is one clear line and
    not bolt's logged traceback (the URL is single-use and simply dropped)."""
    assert settings.slack_app_token is not None
    try:
        make_client(settings).apps_connections_open(app_token=settings.slack_app_token.get_secret_value())
    except SlackApiError as exc:
        raise ConfigError(f"SLACK_APP_TOKEN: Slack refused it ({exc.response.get('error')})") from None


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def serve(settings: Settings, port: int = 3000) -> int:
    """Run the adapter until SIGTERM/SIGINT."""
    from worker.jobs.runtime import build_runtime
    from worker.ops.redis_connection import connect, describe

    _check(settings)
    app = build_app(settings)
    _verify_bot_token(app)
    if settings.slack_app_token:
        _verify_app_token(settings)
    deps = SlackDeps(settings=settings, redis=connect(settings), runtime=build_runtime(settings))
    register(app, deps)
    if settings.metrics_port is not None:
        from worker.jobs.queue import queue_depth
        from worker.ops.metrics import serve_metrics

        serve_metrics(deps.redis, settings.metrics_port, queue_depth)
    if settings.slack_app_token:
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        log.info("slack adapter: Socket Mode, queue on %s", describe(settings))
        handler = SocketModeHandler(app, settings.slack_app_token.get_secret_value())
        try:
            handler.connect()
        except SlackApiError as exc:
            raise ConfigError(f"SLACK_APP_TOKEN: Slack refused it ({exc.response.get('error')})") from None
        # SIGTERM as Ctrl-C (bolt's start() leaves it to kill the process): stop taking envelopes,
        # and let the listeners of those already acked finish (the executor is joined at exit).
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            log.info("slack adapter: stopping")
        finally:
            handler.close()
        return 0
    server = SlackHTTPServer(app, port=port)

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("slack adapter: signal %s, stopping", signum)
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("slack adapter: HTTP on :%d%s, queue on %s", server.port, EVENTS_PATH, describe(settings))
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
    return 0
