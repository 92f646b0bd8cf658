"""`codebot web`: logging out ends a session on the server, and failed logins are throttled.

The console's ASGI app on uvicorn on an ephemeral port over the rig's real (embedded) Redis;
plain HTTP requests from several loopback addresses (each its own peer). The throttle's windows
run on a clock the test holds, so the tests count attempts and never wait.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from bot.web.app import build_app
from bot.web.auth import Gate
from tests.support.console_rig import ADMIN_TOKEN, OPERATOR_TOKEN, request, serving
from tests.support.e2e import Rig

pytestmark = pytest.mark.rig(
    web_token=OPERATOR_TOKEN,
    web_admin_token=ADMIN_TOKEN,
    web_login_failures_per_address=5,
    web_login_failures_total=8,
    web_login_window_seconds=900,
)
START = 900 * 1_111_112 + 200.0  # 200 s into a 900 s window: 700 s left


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def console(rig: Rig, clock: Clock) -> Iterator[str]:
    with serving(build_app(rig.runtime, rig.redis, clock=clock)) as base:
        yield base


def log_in(base: str, token: str, source: str = "127.0.0.1") -> tuple[int, dict[str, str], str]:
    return request(base + "/login", data=f"token={token}".encode(), source=source)


def test_after_logout_a_copied_session_cookie_no_longer_opens_a_page(console: str) -> None:
    status, headers, _ = log_in(console, OPERATOR_TOKEN)
    assert status == 303
    cookie = {"Cookie": headers["set-cookie"].split(";")[0]}
    copied = dict(cookie)
    assert request(console + "/questions", cookie)[0] == 200
    assert request(console + "/questions", copied, source="127.0.0.5")[0] == 200
    request(console + "/logout", cookie, data=b"")  # its page: test_web_console.py
    for source in ("127.0.0.1", "127.0.0.5"):
        status, headers, _ = request(console + "/questions", copied, source=source)
        assert (status, headers["location"]) == (303, "/login"), source


def test_a_session_ends_when_the_console_is_given_another_token(rig: Rig, console: str) -> None:
    _, headers, _ = log_in(console, OPERATOR_TOKEN)
    cookie = {"Cookie": headers["set-cookie"].split(";")[0]}
    assert request(console + "/questions", cookie)[0] == 200
    changed = rig.settings.model_copy(update={"web_token": SecretStr("another-operator-token-0123456789")})
    with serving(build_app(rig.runtime, rig.redis, Gate(changed))) as restarted:
        status, headers, _ = request(restarted + "/questions", cookie)
    assert (status, headers["location"]) == (303, "/login")


def test_five_failed_logins_from_one_address_make_it_wait_while_others_log_in(
    console: str, clock: Clock
) -> None:
    for attempt in range(5):
        assert log_in(console, f"guess-{attempt}")[0] == 401, attempt
    status, headers, body = log_in(console, OPERATOR_TOKEN)  # the right token, too late
    assert status == 429 and headers["retry-after"] == "700" and "700 seconds" in body
    assert "set-cookie" not in headers
    assert log_in(console, OPERATOR_TOKEN, source="127.0.0.3")[0] == 303
    clock.now = START + 700  # the next window
    assert log_in(console, OPERATOR_TOKEN)[0] == 303


def test_wrong_bearer_tokens_count_as_failed_logins(console: str) -> None:
    for _ in range(5):
        assert request(console + "/questions", {"Authorization": "Bearer guess"})[0] == 401
    status, headers, _ = request(console + "/questions", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert status == 429 and headers["retry-after"] == "700"
    assert (
        request(console + "/questions", {"Authorization": f"Bearer {ADMIN_TOKEN}"}, source="127.0.0.3")[0]
        == 200
    )


def test_failed_logins_from_many_addresses_together_stop_every_login_until_the_window_ends(
    console: str, clock: Clock
) -> None:
    for source in ("127.0.0.1", "127.0.0.2"):
        for attempt in range(4):  # under the per-address limit, 8 in all
            assert log_in(console, f"guess-{attempt}", source=source)[0] == 401
    status, headers, _ = log_in(console, OPERATOR_TOKEN, source="127.0.0.3")
    assert status == 429 and headers["retry-after"] == "700"
    clock.now = START + 700
    assert log_in(console, OPERATOR_TOKEN, source="127.0.0.3")[0] == 303
