"""Files served over real HTTP, for the fake Slack and Discord and for a foreign host.

    store = FileStore(token_prefix="Bearer xoxb-")   # Slack: 403 without the bot token
    url = store.put(base, "/files-pri/T1-F1/download/app.log", b"...")
    store.fail(url, 404)      # or 403; store.hang(url): held until the store is closed
    store.redirect(url, elsewhere)   # 302 to another URL (Slack's login page, say)
    status, headers, body = store.answer(path, request_headers)   # what the fake's server sends
    store.requests            # every request: path and headers (who sent a token where)

`Range: bytes=-N` and `bytes=A-B` are honoured (206 with Content-Range), as CDNs do.
`ForeignHost` is a server of its own holding a FileStore: a host no token may reach.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

HANG_SECONDS = 120.0  # a held download is answered at the latest then (a hang guard)


@dataclass
class FileRequest:
    path: str
    headers: dict[str, str]

    @property
    def authorization(self) -> str:
        return next((v for k, v in self.headers.items() if k.lower() == "authorization"), "")


class FileStore:
    def __init__(self, token_prefix: str | None = None) -> None:
        self.token_prefix = token_prefix  # required in Authorization, else 403 (None: no check)
        self.ranges = True  # False: `Range` ignored, every file sent whole (as some hosts do)
        self.files: dict[str, bytes] = {}
        self.requests: list[FileRequest] = []
        self._faults: dict[str, int] = {}
        self._hangs: dict[str, threading.Event] = {}
        self._redirects: dict[str, str] = {}
        self._lock = threading.Lock()

    def put(self, base: str, path: str, data: bytes) -> str:
        """Serve `data` at `path`; returns its URL under `base`."""
        with self._lock:
            self.files[path] = data
        return base + path

    def fail(self, url: str, status: int) -> None:
        with self._lock:
            self._faults[urlsplit(url).path] = status

    def redirect(self, url: str, location: str) -> None:
        with self._lock:
            self._redirects[urlsplit(url).path] = location

    def hang(self, url: str) -> None:
        with self._lock:
            self._hangs[urlsplit(url).path] = threading.Event()

    def close(self) -> None:
        with self._lock:
            for event in self._hangs.values():
                event.set()

    def answer(self, target: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        path = urlsplit(target).path
        request = FileRequest(target, headers)
        with self._lock:
            self.requests.append(request)
            hang, fault, data = self._hangs.get(path), self._faults.get(path), self.files.get(path)
            location = self._redirects.get(path)
        if hang is not None:
            hang.wait(HANG_SECONDS)
        if self.token_prefix is not None and not request.authorization.startswith(self.token_prefix):
            return 403, {"Content-Type": "text/plain"}, b"forbidden"
        if location is not None:
            return 302, {"Location": location, "Content-Type": "text/plain"}, b""
        if fault is not None:
            return fault, {"Content-Type": "text/plain"}, b"no"
        if data is None:
            return 404, {"Content-Type": "text/plain"}, b"not found"
        wanted = next((v for k, v in headers.items() if k.lower() == "range"), "") if self.ranges else ""
        return _ranged(data, wanted)


def _ranged(data: bytes, wanted: str) -> tuple[int, dict[str, str], bytes]:
    plain = {"Content-Type": "application/octet-stream"}
    if not wanted.startswith("bytes=") or not data:
        return 200, plain, data
    first, _, last = wanted[len("bytes=") :].partition("-")
    start = max(len(data) - int(last), 0) if not first else int(first)
    end = len(data) - 1 if not first or not last else min(int(last), len(data) - 1)
    headers = {**plain, "Content-Range": f"bytes {start}-{end}/{len(data)}"}
    return 206, headers, data[start : end + 1]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        status, headers, body = self.server.store.answer(self.path, dict(self.headers.items()))
        send(self, status, headers, body)


def send(handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes) -> None:
    try:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    except OSError:  # the client gave up (a download's timeout)
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    store: FileStore


class ForeignHost:
    """A host on loopback that is neither Slack's nor Discord's: it records what reached it."""

    def __init__(self) -> None:
        self.store = FileStore()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.store = self.store
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def put(self, path: str, data: bytes) -> str:
        return self.store.put(self.base, path, data)

    def close(self) -> None:
        self.store.close()
        self._server.shutdown()
        self._server.server_close()
