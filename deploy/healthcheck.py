#!/usr/bin/env python3
"""The image's health probe (the Dockerfile's HEALTHCHECK, deploy/compose.yaml's healthchecks):
`GET /health` on a codebot role's own port; exit 0 when it answers 200, 1 otherwise.

    codebot-healthcheck URL   # e.g. http://127.0.0.1:3000/health: compose names each role's port
    codebot-healthcheck       # the metrics port's /health (CODEBOT_METRICS_PORT, CODEBOT_METRICS_HOST)

Without a URL and without CODEBOT_METRICS_PORT (`codebot web` or `codebot mcp` run by hand) the
role serves no health endpoint the image knows of: the probe says so and exits 0, because an
"unhealthy" that no fix can clear only teaches operators to ignore it.

Standard library only (it runs in the image's Python, nothing else installed for it), and never
through a proxy: http.client ignores HTTP(S)_PROXY, which the model endpoint may need and a
probe of the container's own port must not take.
"""

from __future__ import annotations

import http.client
import os
import sys
from urllib.parse import urlsplit

TIMEOUT_SECONDS = 5.0
# Listening on every address is reached on loopback from inside the same container.
WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}


def metrics_url(environ: dict[str, str]) -> str | None:
    """The metrics port's /health, as this process's settings name it; None when it serves none."""
    port = environ.get("CODEBOT_METRICS_PORT", "").strip()
    if not port:
        return None
    host = environ.get("CODEBOT_METRICS_HOST", "127.0.0.1").strip()
    host = WILDCARDS.get(host, host)
    return f"http://[{host}]:{port}/health" if ":" in host else f"http://{host}:{port}/health"


def probe(url: str) -> tuple[bool, str]:
    """(healthy, what to print): healthy only for a 200."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or not parts.port:
        return False, f"not a URL this probe checks (http://HOST:PORT/PATH): {url}"
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=TIMEOUT_SECONDS)
    try:
        connection.request("GET", parts.path or "/")
        response = connection.getresponse()
        body = response.read(200).decode("utf-8", "replace").strip()
    except (OSError, http.client.HTTPException) as exc:
        return False, f"{url}: {type(exc).__name__}: {exc}"
    finally:
        connection.close()
    return response.status == 200, f"{url}: {response.status} {body}"


def main(argv: list[str], environ: dict[str, str]) -> int:
    url = argv[0] if argv else metrics_url(environ)
    if url is None:
        print("no health endpoint to check: CODEBOT_METRICS_PORT is not set and no URL was given")
        return 0
    healthy, said = probe(url)
    print(said)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], dict(os.environ)))
