"""`codebot web`: the console's ASGI app on uvicorn, on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import logging
import socket

import uvicorn

from bot.web.app import build_app
from bot.web.auth import Gate
from config.errors import ConfigError
from config.settings import Settings

log = logging.getLogger("codebot.web")


def bind(host: str, port: int) -> socket.socket:
    try:
        return socket.create_server((host, port))
    except OSError as exc:
        raise ConfigError(f"CODEBOT_WEB_PORT: cannot listen on {host}:{port} ({exc.strerror})") from None


def make_server(settings: Settings, listener: socket.socket) -> uvicorn.Server:
    from worker.jobs.runtime import build_runtime
    from worker.ops.redis_connection import connect

    gate = Gate(settings)  # no token and no proxy header: one line now, not an open console
    app = build_app(build_runtime(settings), connect(settings, check_writes=False), gate)
    config = uvicorn.Config(app, lifespan="off", access_log=False, log_level="warning", server_header=False)
    return uvicorn.Server(config)


def serve(settings: Settings, host: str, port: int) -> int:
    """Serve until SIGTERM/SIGINT (uvicorn's own handlers)."""
    listener = bind(host, port)
    server = make_server(settings, listener)
    where = f"http://{host}:{listener.getsockname()[1]}/"
    log.info("web console on %s", where)
    print(f"codebot web: the console is at {where} (log in with CODEBOT_WEB_TOKEN)", flush=True)
    server.run(sockets=[listener])
    return 0
