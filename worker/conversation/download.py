"""One attached file downloaded over HTTP(S): its end within a byte cap, within a time limit.

Used by the platforms' readers (bot/slack/files.py, bot/discord/files.py), which decide first
whether a URL's host may be asked at all and with which credentials. Here:

- Redirects are never followed: a credential sent with the request can reach no other host
  (Slack answers a request lacking `files:read` with a redirect to its login page).
- A file known (or suspected) to be over `max_bytes` is asked for its end (`Range: bytes=-N`):
  a log says most at its end. A host that ignores the range is read as a stream, its last
  `max_bytes` kept, up to STREAM_FACTOR times that: then it is given up as too large.
- The whole download must finish within `timeout` seconds (connect, wait and read together).
"""

from __future__ import annotations

import os
import ssl
import threading
import time
from collections import deque
from urllib.parse import urlsplit

import httpx2

from worker.conversation.thread import Fetched, FileUnreadable

STREAM_FACTOR = 8  # a host ignoring Range is read at most this many times the cap
CHUNK_BYTES = 64 * 1024
_tls_lock = threading.Lock()
_tls: tuple[int, ssl.SSLContext] | None = None  # (the process it was made in, the context)


def tls_context() -> ssl.SSLContext:
    """The process's one TLS context (loading the CA store costs ~50 ms: once, not per file);
    made anew in a forked child, which shares no OpenSSL state with its parent."""
    global _tls
    with _tls_lock:
        if _tls is None or _tls[0] != os.getpid():
            _tls = (os.getpid(), ssl.create_default_context())
        return _tls[1]


def download(
    url: str, headers: dict[str, str], max_bytes: int, timeout: float, size: int | None = None
) -> Fetched:
    """The file at `url` (its last `max_bytes` when longer); raises FileUnreadable."""
    ask_end = size is None or size > max_bytes
    wanted = {**headers, "Range": f"bytes=-{max_bytes}"} if ask_end else dict(headers)
    deadline = time.monotonic() + timeout
    try:
        with (
            httpx2.Client(
                follow_redirects=False, timeout=httpx2.Timeout(timeout), verify=tls_context()
            ) as http,
            http.stream("GET", url, headers=wanted) as response,
        ):
            _check(response.status_code)
            if response.status_code == 416:  # the range of an empty file
                return Fetched(b"")
            return _body(response, max_bytes, deadline, partial=response.status_code == 206, size=size)
    except httpx2.TimeoutException as exc:
        raise FileUnreadable("timeout", str(exc)) from exc
    except (httpx2.HTTPError, OSError) as exc:
        raise FileUnreadable("failed", type(exc).__name__) from exc


def on_allowed_host(url: str, hosts: frozenset[str], base_url: str) -> bool:
    """True when `url` is HTTPS on one of `hosts` (default port), or on `base_url`'s origin
    (scheme, host and port: a configured API URL, a local fake in tests)."""
    try:
        parts, base = urlsplit(url), urlsplit(base_url)
        port, base_port = parts.port, base.port
    except ValueError:  # a malformed port
        return False
    if parts.scheme == "https" and parts.hostname in hosts and port in (None, 443):
        return True
    return bool(base.hostname) and (parts.scheme, parts.hostname, port) == (
        base.scheme,
        base.hostname,
        base_port,
    )


def _check(status: int) -> None:
    if status in (404, 410):
        raise FileUnreadable("not_found", f"HTTP {status}")
    if status in (401, 403):
        raise FileUnreadable("forbidden", f"HTTP {status}")
    if status not in (200, 206, 416):
        raise FileUnreadable("refused", f"HTTP {status}")


def _body(
    response: httpx2.Response, max_bytes: int, deadline: float, *, partial: bool, size: int | None
) -> Fetched:
    kept: deque[bytes] = deque()
    held = read = 0
    for chunk in response.iter_bytes(CHUNK_BYTES):
        if time.monotonic() > deadline:
            raise FileUnreadable("timeout", "the download took too long")
        read += len(chunk)
        if read > max_bytes * STREAM_FACTOR:
            raise FileUnreadable("too_large", f"over {read} bytes")
        kept.append(chunk)
        held += len(chunk)
        while kept and held - len(kept[0]) >= max_bytes:
            held -= len(kept.popleft())
    data = b"".join(kept)[-max_bytes:]
    # a range answered: cut when the file is longer; a whole file sent: when more came than kept
    cut = _total(response, size) > len(data) if partial else read > len(data)
    return Fetched(data, cut=cut)


def _total(response: httpx2.Response, size: int | None) -> int:
    """The whole file's length from `Content-Range: bytes a-b/total` (else the platform's size)."""
    total = response.headers.get("content-range", "").rpartition("/")[2]
    return int(total) if total.isdigit() else (size or 0)
