"""The outbox's own bookkeeping (worker/jobs/outbox.py), on the embedded Redis: what is due is
delivered, whatever else the due list holds.

A final message can vanish from Redis while its delivery is due: an operator deletes it, or a
server with a `volatile-*` eviction policy (warned about at start) evicts it, since the outbox's
keys carry a TTL. Its place in the due list must go with it; otherwise every pass looks at it
again, and once a pass's batch is full of such places nothing due after them is ever delivered.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from rq import Queue

from bot.slack.sink import SlackSink
from tests.support.delivery import FAST_DELIVERY, deliver_until_settled
from tests.support.e2e import Rig
from tests.support.metrics import samples
from tests.support.model_server import text, tool_calls
from tests.support.slack_rig import SlackRig
from worker.jobs import outbox
from worker.jobs.admin import status_report
from worker.jobs.outbox import DUE_BATCH, DUE_KEY, Final, deliver_due
from worker.jobs.outbox_backlog import backlog
from worker.jobs.question import Question, reference_id
from worker.jobs.queue import QUESTIONS_QUEUE, queue_depth
from worker.ops.claims import new_token
from worker.ops.metrics import exposition

# the run's own attempt is leased for this long: here the housekeeper's pass may try at once
pytestmark = pytest.mark.rig("e2e", delivery_lease_seconds=0.01)


def test_final_messages_gone_from_redis_do_not_hold_up_the_deliveries_due_after_them(rig: Rig) -> None:
    for n in range(DUE_BATCH):  # a full batch of due messages, then evicted
        gone = rig.question(f"question {n}")
        assert outbox.store(rig.redis, rig.settings, gone, Final(apology="never seen"), new_token())
        rig.redis.delete(outbox.entry_key(gone.id))
    waiting = rig.question("how does retry work?")
    assert outbox.store(rig.redis, rig.settings, waiting, Final(apology="Sorry, later."), new_token())
    assert deliver_until_settled(rig.redis, rig.runtime, waiting.id) == "delivered"
    kind, fields = rig.final(rig.events(waiting))
    assert (kind, fields["text"]) == ("failed", "Sorry, later.")
    assert rig.redis.zcard(DUE_KEY) == 0  # nothing left for later passes to look at


@pytest.mark.rig("e2e", delivery_lease_seconds=0.01, delivery_give_up_seconds=1.0, **FAST_DELIVERY)
def test_a_stored_message_this_release_cannot_read_is_given_up_and_shown_in_status(rig: Rig) -> None:
    question = rig.question("how does retry work?")
    assert outbox.store(rig.redis, rig.settings, question, Final(apology="Sorry."), new_token())
    # as a release with another answer format would have stored it, mid-deploy
    rig.redis.hset(outbox.entry_key(question.id), "final", json.dumps({"kind": "answer", "body": "..."}))
    assert deliver_until_settled(rig.redis, rig.runtime, question.id) == "undeliverable"
    report = status_report(rig.redis, rig.runtime)
    assert "Answers never delivered (given up) in the last 7 days: 1" in report
    assert f"`{reference_id(question.id)}` on console" in report and "KeyError" in report


@pytest.mark.rig("e2e", delivery_lease_seconds=0.01, delivery_give_up_seconds=1.0, **FAST_DELIVERY)
def test_deliveries_and_give_ups_are_served_on_metrics_by_platform(rig: Rig) -> None:
    rig.model.enqueue(tool_calls(("list_repos", {})), text("It retries 5 times."))
    _asked, events = rig.ask("how does retry work?")
    assert rig.final(events)[0] == "answer"
    unreadable = rig.question("and backoff?")
    assert outbox.store(rig.redis, rig.settings, unreadable, Final(apology="Sorry."), new_token())
    rig.redis.hset(outbox.entry_key(unreadable.id), "final", "{}")
    assert deliver_until_settled(rig.redis, rig.runtime, unreadable.id) == "undeliverable"
    found = samples(exposition(rig.redis, queue_depth).decode())
    assert found['codebot_deliveries_total{platform="console",result="delivered"}'] == 1
    assert found['codebot_deliveries_total{platform="console",result="undeliverable"}'] == 1


@pytest.mark.rig("e2e", delivery_lease_seconds=0.01, **FAST_DELIVERY)
def test_status_counts_every_answer_being_retried_not_one_batch_of_them(rig: Rig) -> None:
    refused = [rig.question(f"question {n}") for n in range(DUE_BATCH + 1)]
    for question in refused:  # each refused once: here, unreadable (see above) until given up
        assert outbox.store(rig.redis, rig.settings, question, Final(apology="Sorry."), new_token())
        rig.redis.hset(outbox.entry_key(question.id), "final", "{}")
    attempted: set[str] = set()
    while len(attempted) < len(refused):
        attempted.update(deliver_due(rig.redis, rig.runtime))
    assert backlog(rig.redis).retrying == DUE_BATCH + 1
    report = status_report(rig.redis, rig.runtime)
    assert f"tried again with backoff: {DUE_BATCH + 1} (given up after" in report


HELD_SECONDS = 8.0  # Slack holds the first attempt's call this long: its lease (1 s) runs out


def an_apology_whose_first_post_slack_holds(rig: SlackRig) -> tuple[str, Question, str]:
    """A mention's placeholder, its apology stored (leased to the token returned), and Slack set
    to hold the update that would post it for HELD_SECONDS."""
    ts = rig.mention("how does retry work?")
    rig.settle()
    (job,) = Queue(QUESTIONS_QUEUE, connection=rig.redis).jobs
    question = Question.model_validate_json(job.args[0])
    SlackSink(rig.settings, rig.redis, question).received()  # the placeholder
    first = new_token()
    assert outbox.store(rig.redis, rig.settings, question, Final(apology="Sorry, later."), first)
    rig.api.hang("chat.update", HELD_SECONDS, containing="Sorry, later.")
    return ts, question, first


@pytest.mark.slow
@pytest.mark.rig("slack", delivery_lease_seconds=1.0, delivery_give_up_seconds=2.0, **FAST_DELIVERY)
def test_an_attempt_that_outlived_its_lease_does_not_give_up_an_answer_another_delivered(
    rig: SlackRig,
) -> None:
    ts, question, first = an_apology_whose_first_post_slack_holds(rig)
    with ThreadPoolExecutor(1) as pool:
        late = pool.submit(outbox.deliver, rig.redis, rig.runtime, question.id, first)
        rig.api.wait_for("chat.update")
        assert deliver_until_settled(rig.redis, rig.runtime, question.id) == "delivered"  # the housekeeper
        rig.api.outage("http500")  # the held call comes back refused, past the give-up bound
        assert late.result() != "undeliverable"
    rig.api.outage(None)
    assert [text for text in rig.api.thread_texts("C1", ts) if "Sorry" in text] == ["Sorry, later."]
    assert "given up) in the last 7 days: 0" in status_report(rig.redis, rig.runtime)


@pytest.mark.slow
@pytest.mark.rig("slack", delivery_lease_seconds=1.0, delivery_give_up_seconds=2.0, **FAST_DELIVERY)
def test_an_answer_a_late_attempt_delivered_after_another_gave_up_is_not_listed_as_given_up(
    rig: SlackRig,
) -> None:
    ts, question, first = an_apology_whose_first_post_slack_holds(rig)
    with ThreadPoolExecutor(1) as pool:
        late = pool.submit(outbox.deliver, rig.redis, rig.runtime, question.id, first)
        rig.api.wait_for("chat.update")
        rig.api.outage("http500")  # the housekeeper's attempts are refused past the bound
        assert deliver_until_settled(rig.redis, rig.runtime, question.id) == "undeliverable"
        rig.api.outage(None)  # and then Slack takes the held call after all
        assert late.result() == "delivered"
    assert [text for text in rig.api.thread_texts("C1", ts) if "Sorry" in text] == ["Sorry, later."]
    assert "given up) in the last 7 days: 0" in status_report(rig.redis, rig.runtime)
