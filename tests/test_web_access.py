"""`codebot web`: who gets in, who sees questions' words, and hostile text shown as text.

Real runs of the scripted model fill a real (embedded) Redis; the console's ASGI app runs on
uvicorn on an ephemeral port; requests are plain HTTP (the browser tests are test_web_console.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from redis import Redis

from bot.web.app import build_app
from bot.web.data import thread_url
from codebot.cli_parser import build_parser as _parser
from tests.support.console_rig import (
    ADMIN_TOKEN,
    HOSTILE,
    HOSTILE_REASON,
    OPERATOR_TOKEN,
    Filled,
    fill,
    request,
    serving,
)
from tests.support.e2e import Rig
from worker.jobs.question import reference_id
from worker.jobs.question_log import QUESTIONS_KEY

pytestmark = pytest.mark.rig(
    web_token=OPERATOR_TOKEN,
    web_admin_token=ADMIN_TOKEN,
    web_proxy_user_header="X-Forwarded-User",
    web_trusted_proxies=("127.0.0.2",),  # the tests' proxy connects from 127.0.0.2
    web_allowed_hosts=("console.example.com",),
    web_admins=("alice",),
)


@pytest.fixture
def console(rig: Rig) -> Iterator[tuple[str, Filled]]:
    filled = fill(rig)
    with serving(build_app(rig.runtime, rig.redis)) as base:
        yield base, filled


def test_every_page_without_a_token_sends_the_operator_to_the_login(console: tuple[str, Filled]) -> None:
    base, _ = console
    for page in ("/questions", "/quality", "/repos", "/system"):
        status, headers, body = request(base + page)
        assert (status, headers["location"]) == (303, "/login"), page
        assert "retry" not in body
    assert request(base + "/questions", {"Authorization": "Bearer wrong"})[0] == 401


def test_a_wrong_token_is_refused_and_the_right_one_opens_a_session(console: tuple[str, Filled]) -> None:
    base, _ = console
    status, _, body = request(base + "/login", data=b"token=guess")
    assert status == 401 and "not one of the console" in body
    status, headers, _ = request(base + "/login", data=f"token={OPERATOR_TOKEN}".encode())
    assert status == 303 and headers["location"] == "/questions"
    cookie = headers["set-cookie"].split(";")[0]
    assert OPERATOR_TOKEN not in cookie and "HttpOnly" in headers["set-cookie"]
    status, _, body = request(base + "/questions", {"Cookie": cookie})
    assert status == 200 and "3 questions" in body


def test_an_operator_sees_the_facts_of_each_question_but_never_its_words(console: tuple[str, Filled]) -> None:
    base, filled = console
    _, _, body = request(base + "/questions", {"Authorization": f"Bearer {OPERATOR_TOKEN}"})
    assert reference_id(filled.answered.id) in body and "answered" in body and "failed" in body
    assert "how many times does retry try?" not in body
    _, _, trace = request(
        f"{base}/questions/{filled.answered.id}", {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    )
    assert "search" in trace and "read_file" in trace and "how many times" not in trace


def test_an_operator_sees_each_tool_call_by_name_and_outcome_but_never_its_arguments(
    console: tuple[str, Filled],
) -> None:
    base, filled = console
    page = f"{base}/questions/{filled.answered.id}"
    _, _, trace = request(page, {"Authorization": f"Bearer {OPERATOR_TOKEN}"})
    steps = re.findall(r"<li><code>(\w+)</code> → <span[^>]*>([\w ]+)</span></li>", trace)
    assert steps == [("search", "ok"), ("read_file", "ok")]
    assert "2 ok · 0 errors · 0 cut off" in trace
    assert "def retry" not in trace and "payments/retry.py" not in trace  # the model's words
    _, _, admins_trace = request(page, {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert "def retry" in admins_trace and "payments/retry.py" in admins_trace


def test_admins_by_token_or_by_the_proxy_header_see_the_questions(console: tuple[str, Filled]) -> None:
    base, _ = console
    _, _, body = request(base + "/questions", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert "how many times does retry try?" in body
    _, _, body = request(base + "/questions", {"X-Forwarded-User": "alice"}, source="127.0.0.2")
    assert "how many times does retry try?" in body
    status, _, body = request(base + "/questions", {"X-Forwarded-User": "bob"}, source="127.0.0.2")
    assert status == 200 and "how many times does retry try?" not in body


def test_the_proxy_user_header_from_an_address_not_trusted_lets_nobody_in(
    console: tuple[str, Filled],
) -> None:
    base, _ = console
    forged = {"X-Forwarded-User": "alice", "X-Forwarded-For": "127.0.0.2", "X-Real-IP": "127.0.0.2"}
    for source in ("127.0.0.1", "127.0.0.3"):
        status, headers, body = request(base + "/questions", forged, source=source)
        assert (status, headers["location"]) == (303, "/login"), source
        assert "how many times" not in body


def test_a_wrong_bearer_token_is_refused_even_with_a_trusted_proxys_user_header(
    console: tuple[str, Filled],
) -> None:
    base, _ = console
    both = {"X-Forwarded-User": "alice", "Authorization": "Bearer wrong"}
    status, _, body = request(base + "/questions", both, source="127.0.0.2")
    assert status == 401 and "how many times" not in body


def test_a_host_the_console_was_not_configured_for_is_refused_on_every_path(
    console: tuple[str, Filled],
) -> None:
    base, _ = console
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    for page in ("/health", "/login", "/questions"):  # a DNS-rebinding page names its own host
        status, _, body = request(base + page, {**admin, "Host": "attacker.example:8780"})
        assert status == 400 and "how many times" not in body, page
    status, _, _ = request(base + "/login", data=b"token=x", headers={"Host": "attacker.example"})
    assert status == 400
    proxied = {"X-Forwarded-User": "alice", "Host": "attacker.example"}
    assert request(base + "/questions", proxied, source="127.0.0.2")[0] == 400
    for host in ("console.example.com", "localhost:8780", "127.0.0.1"):
        status, _, body = request(base + "/questions", {**admin, "Host": host})
        assert status == 200 and "how many times does retry try?" in body, host


def test_hostile_questions_reasons_and_tool_arguments_are_shown_as_inert_text(
    console: tuple[str, Filled],
) -> None:
    base, filled = console
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    pages = [
        request(base + page, admin)[2]
        for page in ("/questions", "/quality", f"/questions/{filled.hostile.id}")
    ]
    joined = "".join(pages)
    assert "<script>" not in joined and "<img" not in joined
    assert "&lt;script&gt;alert(" in pages[0] and "&lt;img src=x onerror=alert(1)&gt;" in pages[2]
    assert "&lt;/td&gt;&lt;script&gt;alert(&#34;reason&#34;)" in pages[1]
    assert HOSTILE_REASON not in joined and HOSTILE not in joined
    _, headers, _ = request(base + "/questions", admin)
    assert "default-src 'none'" in headers["content-security-policy"]


def test_the_console_listens_on_localhost_unless_told_and_needs_a_token_to_start(rig: Rig) -> None:
    args = _parser().parse_args(["web"])
    assert (args.host, args.port) == (None, None)  # the settings' defaults apply
    fields = type(rig.settings).model_fields
    for listener in ("web_host", "metrics_host", "slack_http_host", "mcp_http_host"):  # every listener
        assert fields[listener].default == "127.0.0.1", listener
    assert (
        _parser().parse_args(["slack"]).host is None and _parser().parse_args(["mcp", "--http"]).host is None
    )
    assert refused_start(rig, {}).startswith("codebot: CODEBOT_WEB_TOKEN: not set")


def where_we_are() -> dict[str, str]:
    """PYTHONPATH, when set: a checkout's tests run that checkout's `codebot`, not an installed one."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}


def refused_start(rig: Rig, env: dict[str, str]) -> str:
    """`codebot web` run with `env`, which must refuse to start: its one line on stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "codebot.cli", "web", "--port", "0"],
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "CODEBOT_DATA_DIR": str(rig.settings.data_dir),
            **where_we_are(),
            **env,
        },
        timeout=60,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    return result.stderr


def test_a_short_token_is_refused_at_start_naming_the_setting_and_how_to_make_one(rig: Rig) -> None:
    line = refused_start(rig, {"CODEBOT_WEB_TOKEN": OPERATOR_TOKEN, "CODEBOT_WEB_ADMIN_TOKEN": "hunter2"})
    assert line.startswith("codebot: CODEBOT_WEB_ADMIN_TOKEN: 7 characters, the console needs at least 32")
    assert "python -c 'import secrets; print(secrets.token_urlsafe(32))'" in line
    assert "hunter2" not in line


def test_a_proxy_user_header_without_trusted_proxies_is_refused_at_start(rig: Rig) -> None:
    env = {"CODEBOT_WEB_TOKEN": OPERATOR_TOKEN, "CODEBOT_WEB_PROXY_USER_HEADER": "X-Forwarded-User"}
    assert refused_start(rig, env).startswith("codebot: CODEBOT_WEB_TRUSTED_PROXIES: not set")


def test_a_new_operator_runs_codebot_web_and_logs_in_with_the_token_to_see_the_questions(
    rig: Rig,
) -> None:
    fill(rig)
    env = {
        **os.environ,
        "CODEBOT_DATA_DIR": str(rig.settings.data_dir),
        "CODEBOT_REPOS_FILE": str(rig.settings.repos_file),
        "CODEBOT_WEB_TOKEN": OPERATOR_TOKEN,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "codebot.cli", "web", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        base = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert base, line + (process.stderr.read() if process.poll() is not None and process.stderr else "")
        status, headers, _ = request(base[0] + "/login", data=f"token={OPERATOR_TOKEN}".encode())
        assert status == 303
        cookie = {"Cookie": headers["set-cookie"].split(";")[0]}
        _, _, questions = request(base[0] + "/questions", cookie)
        _, _, quality = request(base[0] + "/quality", cookie)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    assert "3 questions" in questions and "search×1" in questions
    assert quality.count("<svg") == 2 and 'class="dot s1"' in quality


def test_an_outcome_kind_this_release_does_not_know_is_shown_and_filtered_as_it_is(
    console: tuple[str, Filled], rig: Rig
) -> None:
    base, _ = console
    later = {
        "id": "q-later",
        "ref": "0badc0de",
        "status": "cut_off",
        "outcome": "cut_off",
        "repos": ["payments"],
    }
    rig.redis.lpush(QUESTIONS_KEY, json.dumps({**later, "platform": "slack", "channel": "C1", "at": 1.0}))
    admin = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    _, _, every = request(base + "/questions", admin)
    assert "4 questions" in every and '<option value="cut_off">cut_off</option>' in every
    _, _, only = request(base + "/questions?outcome=cut_off", admin)
    assert "1 question<" in only and "0badc0de" in only
    _, _, gaps = request(base + "/quality", admin)
    assert "cut_off" in gaps  # a coverage gap: not an answer


def test_with_redis_unreachable_a_page_says_so_instead_of_a_traceback(rig: Rig) -> None:
    gone = Redis(port=1, socket_connect_timeout=1)  # nothing listens on port 1
    with serving(build_app(rig.runtime, gone)) as base:
        status, _, body = request(base + "/system", {"Authorization": f"Bearer {OPERATOR_TOKEN}"})
    assert status == 503 and "Redis: ConnectionError" in body and "Traceback" not in body


def test_thread_links_are_built_from_the_platforms_ids_and_stay_inside_their_sites() -> None:
    slack = {"platform": "slack", "team": "T1", "channel": "C1", "thread": "1700000000.000100"}
    assert thread_url(slack) == "https://app.slack.com/client/T1/C1/thread/C1-1700000000.000100"
    discord = {"platform": "discord", "guild": "9", "channel": "8", "thread": "7"}
    assert thread_url(discord) == "https://discord.com/channels/9/7"
    assert (
        thread_url({"platform": "discord", "channel": "8", "message": "6"})
        == "https://discord.com/channels/@me/8/6"
    )
    hostile = {"platform": "slack", "team": "T1", "channel": "../../evil?x=<b>", "thread": ""}
    assert thread_url(hostile) == "https://app.slack.com/client/T1/..%2F..%2Fevil%3Fx%3D%3Cb%3E"
    assert thread_url({"platform": "console", "channel": "console"}) is None


def test_every_vote_the_console_shows_is_named_in_words_beside_its_emoji(console: tuple[str, Filled]) -> None:
    base, filled = console
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    pages = ("/questions", "/quality", f"/questions/{filled.answered.id}")
    shown = [request(base + page, admin)[2] for page in pages]
    # without an emoji font a bare 👍 is an empty box: every one is followed by its meaning
    for page, body in zip(pages, shown, strict=True):
        text = re.sub(r"<[^>]+>", " ", body)
        bare = re.findall(r"[👍👎](?!\s+(?:helpful|not helpful|not-helpful|Why answers))", text)
        assert not bare, (page, bare)
    assert "👍 helpful" in shown[0] and "👎 not helpful" in shown[1]
    assert "👍 helpful" in re.sub(r"<[^>]+>", " ", shown[2])
