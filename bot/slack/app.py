"""`codebot slack`: the bolt App, its wiring table, and the two ways Slack reaches it.

- Socket Mode when SLACK_APP_TOKEN is set: an outbound WebSocket, no public URL needed.
- HTTP otherwise: `POST /slack/events` (events, slash commands) on `--port`, served by uvicorn
  with connections, request time, body size and dispatch threads bounded (bot/slack/http_server.py).
  The signature and timestamp are checked (401 otherwise), an event is acked at once and its
  listener runs in a second process (bot/slack/intake_process.py); bolt answers
  `url_verification` itself. `GET /health` answers 200 for load balancers.

Every Web API client (the App's, and bolt's per-request copies) uses SLACK_API_URL and waits
out 429s as Slack's Retry-After says.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from types import FrameType
from typing import Any

from redis import Redis
from slack_bolt import App, BoltRequest, BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.queue_notices import QueueNotices
from bot.slack.assistant import SlackAssistant
from bot.slack.feedback import ACTION_ID, REASON_CALLBACK_ID, SlackFeedback
from bot.slack.handlers import SlackDeps, SlackHandlers
from bot.slack.http_server import EVENTS_PATH, SlackHTTPServer, start_all_threads
from bot.slack.intake_process import Headers, IntakeProcess, serve_inbox
from bot.slack.sink import SlackSink, make_client
from config.errors import ConfigError
from config.settings import Settings
from worker.jobs.question import Question
from worker.tools.redact import get_redactor

log = logging.getLogger("codebot.slack")

__all__ = ["EVENTS_PATH", "SlackHTTPServer", "build_app", "register", "serve"]


def register(app: App, deps: SlackDeps) -> SlackHandlers:
    """The wiring table: every event and command codebot subscribes to, and its handler.

    Order matters: bolt runs the first listener that matches, and an event with no listener
    gets a 404, which Slack retries; the last line makes sure that never happens.
    """
    handlers = SlackHandlers(deps)
    assistant = SlackAssistant(deps.runtime.whitelist)
    votes = SlackFeedback(deps.settings, lambda: deps.redis)
    app.event("app_mention")(handlers.on_app_mention)  # @codebot in a channel the app is in
    app.event("message")(handlers.on_message)  # message.im: DMs; message.channels/groups: follow-ups
    app.event("assistant_thread_started")(assistant.on_thread_started)  # the AI-apps side panel
    app.event("assistant_thread_context_changed")(assistant.on_context_changed)
    app.command("/codebot")(handlers.on_command)  # repos | help | refresh NAME|all | status
    app.action(ACTION_ID)(votes.on_click)  # 👍/👎 under an answer (interactivity)
    app.view(REASON_CALLBACK_ID)(votes.on_reason)  # the optional reason after a 👎
    app.event(re.compile(".*"))(handlers.ignore)  # anything else subscribed: ack, drop
    app.use(_app_rate_limited)  # not an event_callback: no listener would match it (a 404)
    app.error(_log_error)
    return handlers


def _app_rate_limited(body: dict[str, Any], next: Callable[[], BoltResponse]) -> BoltResponse | None:
    """Slack stops delivering events for a minute when an app gets more than 30,000 an hour
    (docs/platform-notes.md §1a). It says so once, with a top-level `app_rate_limited` payload, after
    the signature check (bolt's own middleware runs first): acknowledge it and say it loudly."""
    if body.get("type") != "app_rate_limited":
        return next()
    log.warning(
        "slack: Slack is rate-limiting this app's events (app_rate_limited) for team %s since minute %s: "
        "events of that minute are dropped by Slack, not delivered",
        body.get("team_id"),
        body.get("minute_rate_limited"),
    )
    return BoltResponse(status=200, body="")


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


def queue_notices(settings: Settings, redis: Redis) -> QueueNotices:
    """Slack questions waiting in the queue say so in their placeholder (bot/queue_notices.py)."""

    def show(question: Question, text: str) -> None:
        SlackSink(settings, redis, question).show_waiting(text)

    return QueueNotices(settings, lambda: redis, "slack", show)


def _wired_app(settings: Settings, verify: bool) -> tuple[App, SlackDeps]:
    """The bolt App with the wiring table, its deps, and what every delivery shares built now,
    not by the first deliveries: the redactor costs ~0.5 s of CPU and each new listener thread a
    turn of the GIL, which the acks of a burst need too (bench/RESULTS.md, "Slack ack")."""
    from worker.jobs.runtime import build_runtime
    from worker.ops.redis_connection import connect

    listeners = ThreadPoolExecutor(settings.slack_listener_threads, thread_name_prefix="slack-listener")
    app = build_app(settings, executor=listeners)
    if verify:
        _verify_bot_token(app)
        if settings.slack_app_token:
            _verify_app_token(settings)
    deps = SlackDeps(settings=settings, redis=connect(settings), runtime=build_runtime(settings))
    register(app, deps)
    get_redactor()
    start_all_threads(listeners, settings.slack_listener_threads)
    return app, deps


def serve(settings: Settings, port: int = 3000, host: str | None = None) -> int:
    """Run the adapter until SIGTERM/SIGINT."""
    _check(settings)
    app, deps = _wired_app(settings, verify=True)
    if settings.metrics_port is not None:
        from worker.jobs.queue import queue_depth
        from worker.ops.metrics import serve_metrics

        serve_metrics(deps.redis, settings.metrics_port, queue_depth, host=settings.metrics_host)
    if settings.slack_app_token:
        queue_notices(settings, deps.redis).start()  # a daemon thread: ends with the process
        return _serve_socket_mode(app, settings)
    return _serve_http(app, settings, port, host or settings.slack_http_host)


def _serve_socket_mode(app: App, settings: Settings) -> int:
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    from worker.ops.redis_connection import describe

    assert settings.slack_app_token is not None
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


def _serve_http(app: App, settings: Settings, port: int, host: str) -> int:
    """uvicorn in this process, acking; the acked events' intake in another (its queue notices too)."""
    from worker.ops.redis_connection import describe

    intake = IntakeProcess(run_intake, settings, max_waiting=settings.slack_http_max_connections)
    try:
        server = SlackHTTPServer(app, settings, host=host, port=port, handoff=intake.put)

        def stopped(signum: int, _frame: FrameType | None) -> None:
            # uvicorn handles the signal (stop accepting, finish the requests in flight) and then
            # raises it again for the handler it found: this one, so the process ends by returning,
            # after the intake process dispatched what was acked (and its listeners finished).
            log.info("slack adapter: signal %s, stopped", signum)

        signal.signal(signal.SIGTERM, stopped)
        signal.signal(signal.SIGINT, stopped)
        log.info(
            "slack adapter: HTTP on %s:%s%s, queue on %s", host, server.port, EVENTS_PATH, describe(settings)
        )
        server.serve_forever()
    finally:
        intake.stop()
    return 0


def run_intake(settings: Settings, inbox: Connection, ready: Event) -> None:
    """The intake process of HTTP mode (bot/slack/intake_process.py): the same App and wiring
    table, fed the deliveries the HTTP process acknowledged."""
    from worker.ops.logs import configure_logging

    configure_logging(settings)
    os.nice(settings.slack_intake_niceness)  # when the CPU is short, the acks go first
    app, deps = _wired_app(settings, verify=False)
    queue_notices(settings, deps.redis).start()
    ready.set()

    def dispatch(body: str, headers: Headers) -> int:
        return app.dispatch(BoltRequest(body=body, headers=dict(headers.items()))).status

    serve_inbox(inbox, dispatch)
    log.info("slack intake process: stopped")
