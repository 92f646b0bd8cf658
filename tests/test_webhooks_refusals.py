"""`codebot webhooks` under any input: each bad delivery gets its status and changes nothing.

"Nothing" is checked where it would show: no refresh job on the queue, no snapshot moved.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bot.webhooks import texts
from tests.support.forge_payloads import github_push, hmac_hex, post
from tests.support.webhooks_rig import FORGE_REPOS, SECRETS, HooksRig, build_hooks_rig, push_from
from worker.ops.redis_connection import connect, stop_embedded_server


@pytest.fixture
def hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HooksRig]:
    yield from build_hooks_rig(tmp_path, monkeypatch)


@pytest.mark.parametrize("forge", list(FORGE_REPOS))
def test_a_delivery_signed_with_another_secret_is_refused_and_queues_nothing(
    hooks: HooksRig, forge: str
) -> None:
    sha = hooks.remote.commit({"a.txt": "1\n"})
    status, answer = hooks.post(push_from(forge, sha, secret="not-the-secret"))
    assert (status, answer["verdict"]) == (401, "refused: bad or missing signature")
    assert hooks.queued() == 0


@pytest.mark.parametrize(
    "header", ["X-Hub-Signature-256", "X-Gitlab-Token", "X-Gitea-Signature", "X-Hub-Signature"]
)
def test_a_delivery_without_its_signature_is_refused(hooks: HooksRig, header: str) -> None:
    forge = {"X-Hub-Signature-256": "github", "X-Gitlab-Token": "gitlab", "X-Gitea-Signature": "gitea"}
    delivery = push_from(forge.get(header, "bitbucket"), hooks.remote.sha())
    assert hooks.post(delivery.with_headers(**{header.replace("-", "_"): ""}))[0] == 401
    assert hooks.queued() == 0


def test_a_body_changed_after_signing_is_refused(hooks: HooksRig) -> None:
    delivery = push_from("github", hooks.remote.sha())
    tampered = replace(delivery, body=delivery.body.replace(b"acme/payments", b"acme/vault"))
    assert hooks.post(tampered)[0] == 401
    assert hooks.queued() == 0


def test_a_request_naming_no_forge_is_refused(hooks: HooksRig) -> None:
    delivery = push_from("github", hooks.remote.sha()).with_headers(x_github_event="")
    assert hooks.post(delivery) == (401, {"verdict": texts.NOT_A_FORGE})


def test_a_signed_body_that_is_not_json_is_a_400_and_an_unsigned_one_a_401(hooks: HooksRig) -> None:
    delivery = replace(push_from("github", hooks.remote.sha()), body=b"\x1b]52;c;aGk=\x07 not json")
    signed = delivery.with_headers(x_hub_signature_256="sha256=" + hmac_hex(SECRETS["github"], delivery.body))
    assert hooks.post(signed)[0] == 400
    assert hooks.post(delivery)[0] == 401  # the old signature does not fit this body
    assert hooks.queued() == 0


def test_a_push_to_an_unknown_repo_or_another_branch_is_accepted_and_does_nothing(hooks: HooksRig) -> None:
    sha = hooks.remote.commit({"a.txt": "1\n"})
    unknown = github_push("https://github.com/acme/elsewhere", "main", sha, SECRETS["github"])
    assert hooks.post(unknown) == (202, {"verdict": "ignored: no whitelisted repo has this URL"})
    status, answer = hooks.post(push_from("gitlab", sha, branch="feature/x"))
    assert (status, answer["verdict"]) == (202, "ignored: not the branch codebot follows")
    assert hooks.queued() == 0


def test_a_body_over_the_cap_is_refused_before_it_is_read(hooks: HooksRig) -> None:
    # Content-Length says more than the cap and no body follows: an answer proves nothing was awaited
    connection = http.client.HTTPConnection("127.0.0.1", hooks.server.port, timeout=60)
    connection.putrequest("POST", "/webhooks")
    for name, value in push_from("github", hooks.remote.sha()).headers.items():
        connection.putheader(name, value)
    connection.putheader("Content-Length", str(hooks.settings.webhooks_max_body_bytes + 1))
    connection.endheaders()
    assert connection.getresponse().status == 413
    connection.close()


def test_a_chunked_body_is_read_up_to_the_cap_and_no_further(hooks: HooksRig) -> None:
    delivery = push_from("github", hooks.remote.sha())
    chunks = iter([delivery.body] + [b" " * 16_384] * 1000)  # 16 MB of padding would follow
    connection = http.client.HTTPConnection("127.0.0.1", hooks.server.port, timeout=60)
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # answered and closed mid-body
        connection.request("POST", "/webhooks", body=chunks, headers=delivery.headers, encode_chunked=True)
    assert connection.getresponse().status == 413
    assert hooks.queued() == 0


def test_other_paths_and_methods_are_not_deliveries(hooks: HooksRig) -> None:
    delivery = push_from("github", hooks.remote.sha())
    assert post(hooks.server.port, replace(delivery, path="/slack/events"))[0] == 404
    assert post(hooks.server.port, replace(delivery, method="PUT"))[0] == 405
    assert post(hooks.server.port, replace(delivery, method="GET", body=b""))[0] == 405
    assert hooks.queued() == 0


def test_log_lines_name_forge_delivery_and_verdict_and_nothing_of_the_body_or_secret(
    hooks: HooksRig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="codebot.webhooks")
    delivery = push_from("github", hooks.remote.sha()).with_headers(x_github_delivery="abc\x9b2J\x85forged")
    assert hooks.post(delivery)[0] == 202
    assert hooks.post(push_from("github", hooks.remote.sha(), secret="wrong"))[0] == 401
    lines = [record.getMessage() for record in caplog.records if record.name == "codebot.webhooks"]
    assert any("forge=github delivery=abc?" in line and "refresh queued" in line for line in lines)
    assert any("refused: bad or missing signature" in line for line in lines)
    # C1 controls (8-bit CSI, NEL: what a header can carry) never reach a log line
    assert all(not re.search("[\x00-\x1f\x7f-\x9f]", line) for line in lines)
    logged = "\n".join(lines)
    assert SECRETS["github"] not in logged and "retry bug" not in logged and "ada@" not in logged


def test_a_delivery_while_redis_is_stopped_is_a_503_and_its_redelivery_later_is_acted_on(
    hooks: HooksRig,
) -> None:
    delivery = push_from("github", hooks.remote.commit({"a.txt": "1\n"}))
    assert stop_embedded_server(hooks.settings)  # an operator's stop: the receiver does not undo it
    status, answer = hooks.post(delivery)
    assert (status, answer["verdict"]) == (503, texts.QUEUE_DOWN)
    assert post(hooks.server.port, replace(delivery, method="GET", path="/health", body=b""))[0] == 200
    connect(hooks.settings)  # Redis is back
    assert hooks.post(delivery) == (202, {"verdict": texts.QUEUED, "repos": ["payments"]})  # not a "replay"
    assert hooks.queued() == 1
