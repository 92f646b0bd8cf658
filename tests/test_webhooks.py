"""`codebot webhooks`: a signed push from any forge makes its repo's snapshot the pushed commit.

Real parts throughout: a bare repo pushed to with `git push`, the receiver on a real socket,
embedded Redis, and a real burst RQ worker running the refresh the delivery queued.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.support.forge_payloads import github_ping, github_push, hmac_hex
from tests.support.webhooks_rig import (
    FORGE_REPOS,
    SECRETS,
    VAULT_SECRET,
    WEB_URLS,
    HooksRig,
    build_hooks_rig,
    push_from,
)
from worker.repos.mirrors import Mirrors
from worker.repos.refresh import catch_up, local_sha, wanted_sha


@pytest.fixture
def hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HooksRig]:
    yield from build_hooks_rig(tmp_path, monkeypatch)


@pytest.mark.parametrize("forge", list(FORGE_REPOS))
def test_a_signed_push_from_each_forge_brings_its_repo_to_the_pushed_commit(
    hooks: HooksRig, forge: str
) -> None:
    name = FORGE_REPOS[forge][0]
    before = hooks.runtime.mirrors.sync(name).sha
    pushed = hooks.remote.commit({"payments/retry.py": "MAX_ATTEMPTS = 7\n"}, "fix the retry bug")
    assert hooks.served(name) == before != pushed
    status, answer = hooks.post(push_from(forge, pushed))
    assert (status, answer["repos"]) == (202, [name])
    hooks.work()
    assert hooks.served(name) == pushed
    assert wanted_sha(hooks.redis, name) == pushed  # every other worker machine catches up to it


def test_a_burst_of_fifty_pushes_ends_at_the_newest_commit_with_at_most_two_refreshes(
    hooks: HooksRig,
) -> None:
    hooks.runtime.mirrors.sync("payments")
    statuses = []
    for number in range(50):
        sha = hooks.remote.commit({"CHANGELOG.md": f"v{number}\n"}, f"release {number}")
        statuses.append(hooks.post(github_push(WEB_URLS["payments"], "main", sha, SECRETS["github"]))[0])
    assert statuses == [202] * 50
    assert hooks.queued() <= 2  # the first push queued a refresh; the others were absorbed by it
    hooks.work()
    assert hooks.served("payments") == sha == hooks.remote.sha()
    assert hooks.refreshes("payments") <= 2


def test_a_push_arriving_while_its_refresh_waits_is_absorbed_and_the_refresh_fetches_it(
    hooks: HooksRig,
) -> None:
    first = hooks.remote.commit({"a.txt": "1\n"})
    assert hooks.post(github_push(WEB_URLS["payments"], "main", first, SECRETS["github"]))[1]["verdict"] == (
        "refresh queued"
    )
    second = hooks.remote.commit({"a.txt": "2\n"})
    status, answer = hooks.post(github_push(WEB_URLS["payments"], "main", second, SECRETS["github"]))
    assert status == 202 and answer["verdict"].startswith("refresh already waiting")
    assert hooks.queued() == 1
    hooks.work()
    assert hooks.served("payments") == second
    # once that refresh has run, the next push queues a new one
    third = hooks.remote.commit({"a.txt": "3\n"})
    assert hooks.post(github_push(WEB_URLS["payments"], "main", third, SECRETS["github"]))[0] == 202
    assert hooks.queued() == 1


def test_a_replayed_delivery_changes_nothing(hooks: HooksRig) -> None:
    sha = hooks.remote.commit({"a.txt": "1\n"})
    delivery = github_push(WEB_URLS["payments"], "main", sha, SECRETS["github"])
    assert hooks.post(delivery)[0] == 202
    hooks.work()
    refreshes = hooks.refreshes("payments")
    status, answer = hooks.post(delivery)  # the forge's "redeliver": the same delivery id
    assert (status, answer["verdict"]) == (200, "already received: a delivery is acted on once")
    assert hooks.queued() == 0
    hooks.work()
    assert hooks.refreshes("payments") == refreshes


def test_a_repo_with_its_own_secret_takes_deliveries_signed_with_it_and_no_other(hooks: HooksRig) -> None:
    sha = hooks.remote.commit({"a.txt": "1\n"})
    forge_signed = github_push(WEB_URLS["vault"], "main", sha, SECRETS["github"])
    assert hooks.post(forge_signed)[0] == 401
    assert hooks.queued() == 0
    assert hooks.post(github_push(WEB_URLS["vault"], "main", sha, VAULT_SECRET)) == (
        202,
        {"verdict": "refresh queued", "repos": ["vault"]},
    )
    hooks.work()
    assert hooks.served("vault") == sha


def test_a_github_ping_is_answered_and_queues_nothing(hooks: HooksRig) -> None:
    status, answer = hooks.post(github_ping(WEB_URLS["payments"], SECRETS["github"]))
    assert (status, answer["verdict"]) == (200, "pong: the webhook reaches codebot")
    assert hooks.queued() == 0


def test_a_push_names_its_repo_by_any_form_of_its_url(hooks: HooksRig) -> None:
    # repos.toml has `git@github.com:Acme/Shop.git`; GitHub names it https://github.com/acme/shop(.git)
    sha = hooks.remote.commit({"a.txt": "1\n"})
    status, answer = hooks.post(github_push("https://github.com/acme/shop", "main", sha, SECRETS["github"]))
    assert (status, answer.get("repos")) == (202, ["shop"])
    assert hooks.queued() == 1


def test_a_form_encoded_github_delivery_is_read_like_a_json_one(hooks: HooksRig) -> None:
    sha = hooks.remote.commit({"a.txt": "1\n"})
    json_delivery = github_push(WEB_URLS["payments"], "main", sha, SECRETS["github"])
    body = urlencode({"payload": json_delivery.body.decode()}).encode()
    delivery = json_delivery.with_headers(
        content_type="application/x-www-form-urlencoded",
        x_hub_signature_256="sha256=" + hmac_hex(SECRETS["github"], body),
    )
    assert hooks.post(replace(delivery, body=body)) == (
        202,
        {"verdict": "refresh queued", "repos": ["payments"]},
    )


def test_a_second_worker_machine_catches_up_to_the_pushed_commit(hooks: HooksRig, tmp_path: Path) -> None:
    other = Mirrors(
        hooks.settings.model_copy(update={"data_dir": tmp_path / "machine-b"}), hooks.runtime.whitelist
    )
    assert local_sha(other, "payments") is None
    sha = hooks.remote.commit({"payments/retry.py": "MAX_ATTEMPTS = 9\n"})
    assert hooks.post(push_from("github", sha))[0] == 202
    hooks.work()  # machine A's worker takes the refresh and records the commit
    catch_up(
        other, hooks.redis, ["payments"]
    )  # what machine B's housekeeper does every refresh_check_seconds
    assert local_sha(other, "payments") == sha == hooks.served("payments")
