"""Links and stack traces in a question reach the model as lines it can cite (worker/pointers/),
through the real agent, RQ worker and tools, with the scripted model server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.e2e import DEFAULT_FILES, Rig, build_rig
from tests.support.fixture_repos import make_repo
from tests.support.model_server import text, tool_calls
from worker.pointers import gather_pointers
from worker.tools import make_context

WEB = "https://github.com/acme/payments"
BILLING_MARKER = "PLANTED_BILLING_MARKER = 'only billing holds this line'"


def _first_request(rig: Rig) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = rig.model.requests[0]["messages"]
    return messages


def _everything_sent(rig: Rig) -> str:
    return "\n".join(str(m.get("content")) for r in rig.model.requests for m in r["messages"])


def test_a_python_stack_trace_puts_the_frames_lines_in_the_first_request(rig: Rig) -> None:
    rig.model.enqueue(text("It raises after the last attempt [payments:payments/retry.py#L13]."))
    trace = (
        "why does this fail?\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/site-packages/worker/run.py", line 3, in main\n'
        '  File "/srv/app/payments/retry.py", line 13, in retry\n'
        "RuntimeError: gave up"
    )
    _, events = rig.ask(trace)
    messages = _first_request(rig)
    assert [m["role"] for m in messages] == ["system", "user", "user"]
    context = messages[1]["content"]
    assert "[payments:payments/retry.py#L7-L13]" in context
    assert "13│     raise RuntimeError('gave up')" in context
    assert "7│" in context and "6│" not in context  # six lines above the frame, none more
    assert messages[2]["content"] == trace  # the question itself, after
    kind, answer = rig.final(events)
    assert kind == "answer" and answer["unverified"] == 0  # the frame's lines count as shown
    assert f"{WEB}/blob/{rig.sha}/payments/retry.py#L13" in answer["markdown"]


def test_a_blob_link_with_lines_puts_those_lines_in_the_first_request(rig: Rig) -> None:
    rig.model.enqueue(text("Backoff doubles [payments:payments/retry.py#L6-L8]."))
    _, events = rig.ask(f"what does {WEB}/blob/{rig.sha}/payments/retry.py#L6-L8 do?")
    context = _first_request(rig)[1]["content"]
    assert (
        f"A link to [payments:payments/retry.py#L6-L8], read at payments's commit {rig.sha[:10]}" in context
    )
    assert "6│ def retry(call, attempts=MAX_ATTEMPTS, backoff=0.5):" in context
    assert "8│     for attempt in range(attempts):" in context
    assert "9│" not in context
    kind, answer = rig.final(events)
    assert kind == "answer" and answer["unverified"] == 0


def test_a_link_past_the_end_of_a_file_is_given_as_the_lines_that_exist(rig: Rig) -> None:
    with rig.runtime.mirrors.lease(["payments"]) as snapshots:
        ctx = make_context(rig.settings, snapshots, keep_data=False)
        [pointer] = gather_pointers(
            f"{WEB}/blob/main/payments/retry.py%1b[2J#L10-L70", ctx, rig.runtime.registry
        )
        [readme] = gather_pointers(f"see {WEB}/blob/main/README.md#L2-L90", ctx, rig.runtime.registry)
    assert not pointer.read and "\x1b" not in pointer.text  # no such file; no escape reaches the model
    assert readme.reference == "payments:README.md#L2-L3"  # the file has 3 lines
    assert ctx.shown.covers("payments", "README.md", 2, 3)


def test_a_link_to_a_commit_the_mirror_lacks_is_said_to_be_missing(rig: Rig) -> None:
    rig.model.enqueue(text("That commit is not here; retry is at [payments:payments/retry.py#L6]."))
    ghost = "0badc0de" * 5
    rig.ask(f"what did {WEB}/commit/{ghost} change?")
    context = _first_request(rig)[1]["content"]
    assert "the mirror of payments does not hold that commit" in context


def test_a_link_to_a_secret_file_reads_nothing_of_it(rig: Rig) -> None:
    rig.model.enqueue(text("I cannot read that file."), text("Still cannot."))
    _, events = rig.ask(
        f'what is in {WEB}/blob/{rig.sha}/.env#L1 and here: File "/srv/app/.env", line 1, in x'
    )
    sent = _everything_sent(rig)
    assert "sk_live_51HplantedSecretValue" not in sent
    assert "STRIPE_KEY" not in sent
    context = _first_request(rig)[1]["content"]
    assert "could not be read: Error:" in context and "secret file pattern" in context
    kind, fields = rig.final(events)
    assert kind == "failed" and fields["outcome"] == "not_an_answer"  # a refused read is no code read


@pytest.fixture
def two_repos(tmp_path: Path) -> Iterator[Rig]:
    """payments for the question; billing configured (and synced) but only for another channel."""
    billing = tmp_path / "billing-src"
    make_repo(billing, {"billing/charge.py": f"{BILLING_MARKER}\n" * 20})
    repos_file = tmp_path / "two-repos.toml"
    repos_file.write_text(
        f'[[repo]]\nname = "payments"\nurl = "{tmp_path / "payments-src"}"\nweb_url = "{WEB}"\n'
        'description = "the payments service"\n\n'
        f'[[repo]]\nname = "billing"\nurl = "{billing}"\nweb_url = "https://github.com/acme/billing"\n'
        'channels = ["slack:COTHER"]\n',
        encoding="utf-8",
    )
    builder = build_rig(tmp_path, DEFAULT_FILES, repos_file=repos_file)
    rig = next(builder)
    assert rig.runtime.mirrors.sync("billing").ok  # on this machine, readable by its own channel
    yield rig
    builder.close()


def test_a_link_or_frame_into_a_repo_out_of_scope_reads_and_says_nothing(two_repos: Rig) -> None:
    rig = two_repos
    for _ in range(2):
        rig.model.enqueue(tool_calls(("list_repos", {})), text("Only payments is here."))
    question = (
        "compare https://github.com/acme/billing/blob/main/billing/charge.py#L1-L5 with this:\n"
        '  File "/srv/billing/billing/charge.py", line 3, in charge\n'
    )
    nowhere = question.replace("acme/billing", "acme/nothing").replace("/billing/", "/nothing/")
    rig.ask(question)
    rig.ask(nowhere)
    out_of_scope, no_repo = (r["messages"] for r in (rig.model.requests[0], rig.model.requests[2]))
    assert [m["role"] for m in out_of_scope] == [m["role"] for m in no_repo] == ["system", "user"]
    assert "PLANTED_BILLING_MARKER" not in _everything_sent(rig)
    assert "billing" not in out_of_scope[0]["content"]  # the system prompt: payments only


RETRY_JAVA = (
    "package com.acme.pay;\n\nclass Retry {\n"
    + "".join(f"    int step{i} = {i};\n" for i in range(20))
    + "}\n"
)
OTHER_JAVA = (
    "package com.acme.other;\n\nclass Retry {\n" + '    String other = "not this one";\n' * 20 + "}\n"
)


@pytest.fixture
def two_commits(tmp_path: Path) -> Iterator[tuple[Rig, str]]:
    """payments with an older commit in its mirror, and two Retry.java in different packages."""
    older = make_repo(tmp_path / "payments-src", {"README.md": "# payments\n"})
    files = {
        **DEFAULT_FILES,
        "src/main/java/com/acme/pay/Retry.java": RETRY_JAVA,
        "src/main/java/com/acme/other/Retry.java": OTHER_JAVA,
    }
    builder = build_rig(tmp_path, files)
    yield next(builder), older
    builder.close()


def test_a_java_frame_is_placed_by_its_package_and_a_named_commit_is_said_to_be_read_later(
    two_commits: tuple[Rig, str],
) -> None:
    rig, older = two_commits
    rig.model.enqueue(text("Step ten [payments:src/main/java/com/acme/pay/Retry.java#L13]."))
    rig.ask(
        f"built from {older[:12]}, this fails:\n"
        "java.lang.IllegalStateException: boom\n"
        "\tat com.acme.pay.Retry.run(Retry.java:13)\n"
        "\tat java.base/java.lang.Thread.run(Thread.java:833)\n"
    )
    context = _first_request(rig)[1]["content"]
    assert "[payments:src/main/java/com/acme/pay/Retry.java#L7-L17]" in context
    assert "13│     int step9 = 9;" in context
    assert "not this one" not in context  # the other package's Retry.java
    assert f"The text names commit {older[:12]}, which the mirror of payments holds" in context
    assert f"read at the snapshot's commit {rig.sha[:10]}" in context


@pytest.mark.rig(
    "e2e", files={**DEFAULT_FILES, "vendor/payments/retry.py": "x = 1\n" * 20, "tools/api.py": "y = 2\n"}
)
def test_a_frame_is_placed_by_its_longest_path_suffix_and_a_tie_places_it_nowhere(rig: Rig) -> None:
    trace = (
        'File "/srv/app/payments/retry.py", line 3, in retry\n'  # payments/retry.py and vendor/payments/retry.py tie
        'File "/srv/app/vendor/payments/retry.py", line 4, in x\n'  # the longer suffix wins
        'File "/srv/app/api.py", line 1, in y\n'  # the file name alone, unique: placed
    )
    with rig.runtime.mirrors.lease(["payments"]) as snapshots:
        ctx = make_context(rig.settings, snapshots, keep_data=False)
        pointers = gather_pointers(trace, ctx, rig.runtime.registry)
    assert [p.reference for p in pointers] == [  # the application's frame first, then the vendored one
        "payments:tools/api.py#L1-L1",
        "payments:vendor/payments/retry.py#L1-L8",
    ]
    assert ctx.shown.covers("payments", "vendor/payments/retry.py", 1, 8)  # citable, as the model's reads are
    assert not ctx.shown.files() - {("payments", "vendor/payments/retry.py"), ("payments", "tools/api.py")}
