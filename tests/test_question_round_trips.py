"""A question's own Redis writes after its answer (worker/jobs/job.py, question_end.py): the run
that stored the final message posts what it stored without reading it back, and the thread's
turn and the answer's feedback context are written with the question's record, after delivery.
"""

from __future__ import annotations

import pytest

from tests.support.e2e import Rig
from tests.support.metrics import samples
from tests.support.model_server import text, tool_calls
from worker.jobs import outbox
from worker.jobs.feedback import ANSWER_KEY_PREFIX
from worker.jobs.outbox import DUE_KEY, Final
from worker.jobs.question import Question, ReplyTarget, reference_id
from worker.jobs.queue import queue_depth
from worker.jobs.threads import load_turns
from worker.ops.claims import new_token
from worker.ops.metrics import exposition

pytestmark = pytest.mark.rig("e2e")


def in_thread(rig: Rig, words: str) -> Question:
    asked = rig.question(words)
    return asked.model_copy(update={"target": ReplyTarget(platform="console", channel="c", thread="t1")})


def test_an_answer_in_a_thread_leaves_one_turn_and_its_feedback_context_once_delivered(rig: Rig) -> None:
    rig.model.enqueue(tool_calls(("list_repos", {})), text("It retries 5 times."))
    question = in_thread(rig, "how does retry work?")
    rig.enqueue(question)
    rig.work()
    kind, fields = rig.final(rig.events(question))
    assert kind == "answer" and "It retries 5 times." in fields["markdown"]
    turns = load_turns(rig.redis, "console", "c", "t1")
    assert [(t.question, "It retries 5 times." in t.answer) for t in turns] == [
        ("how does retry work?", True)
    ]
    context = rig.redis.hgetall(ANSWER_KEY_PREFIX + question.id)
    assert context[b"ref"].decode() == reference_id(question.id)
    assert context[b"thread"] == b"t1" and context[b"asker"] == b"tester"


def test_an_answer_posted_by_the_run_that_stored_it_is_marked_delivered_and_counted_once(rig: Rig) -> None:
    rig.model.enqueue(tool_calls(("list_repos", {})), text("It retries 5 times."))
    question, events = rig.ask("how does retry work?")
    assert [kind for kind, _ in events].count("answer") == 1
    entry = rig.redis.hgetall(outbox.entry_key(question.id))
    assert entry[b"state"] == b"delivered" and entry[b"attempts"] == b"0"
    assert rig.redis.zscore(DUE_KEY, question.id) is None  # no later pass tries it again
    found = samples(exposition(rig.redis, queue_depth).decode())
    assert found['codebot_deliveries_total{platform="console",result="delivered"}'] == 1


def test_a_question_found_answered_at_its_start_is_not_answered_again_and_adds_no_turn(rig: Rig) -> None:
    question = in_thread(rig, "how does retry work?")
    earlier = Final(apology="Sorry, earlier run.")
    assert outbox.store(rig.redis, rig.settings, question, earlier, new_token()) == outbox.STORED_NOW
    assert outbox.hand_over(rig.redis, question.id)  # that run died (the reaper says so)
    rig.enqueue(question)
    rig.work()  # the answered marker is read at the start: no model call, the stored one is posted
    kind, fields = rig.final(rig.events(question))
    assert (kind, fields["text"]) == ("failed", "Sorry, earlier run.")
    assert rig.model.requests == []
    assert load_turns(rig.redis, "console", "c", "t1") == []
    assert not rig.redis.exists(ANSWER_KEY_PREFIX + question.id)
