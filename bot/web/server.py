"""`codebot web`: the console's ASGI app on uvicorn, on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import logging
import socket

import uvicorn
from starlette.applications import Starlette

from bot.web import texts
from bot.web.app import build_app
from bot.web.auth import Gate
from bot.web.history_data import open_history
from config.errors import ConfigError
from config.settings import Settings

log = logging.getLogger("codebot.web")


def bind(host: str, port: int) -> socket.socket:
    try:
        return socket.create_server((host, port))
    except OSError as exc:
        raise ConfigError(f"CODEBOT_WEB_PORT: cannot listen on {host}:{port} ({exc.strerror})") from None


def uvicorn_config(app: Starlette) -> uvicorn.Config:
    """uvicorn for the console. proxy_headers=False: uvicorn would otherwise take the client's
    address from X-Forwarded-For on connections from 127.0.0.1, and the console decides whether
    to believe a proxy's user header by that address (bot/web/auth.py)."""
    return uvicorn.Config(
        app, lifespan="off", access_log=False, log_level="warning", server_header=False, proxy_headers=False
    )


def make_server(settings: Settings, gate: Gate, host: str) -> uvicorn.Server:
    from worker.jobs.runtime import build_runtime
    from worker.ops.redis_connection import connect

    redis = connect(settings, check_writes=False)
    history = open_history(settings)  # None: no history database here, the Questions page reads Redis
    app = build_app(build_runtime(settings), redis, gate, listen_host=host, history=history)
    return uvicorn.Server(uvicorn_config(app))


def serve(settings: Settings, host: str, port: int) -> int:
    """Serve until SIGTERM/SIGINT (uvicorn's own handlers)."""
    gate = Gate(settings)  # no token, a short one, a proxy header without proxies: one line, no console
    listener = bind(host, port)
    server = make_server(settings, gate, host)
    where = f"http://{host}:{listener.getsockname()[1]}/"
    log.info("web console on %s", where)
    print(texts.listening(where), flush=True)
    server.run(sockets=[listener])
    return 0
