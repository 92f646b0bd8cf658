"""The outbox: a question's final message is stored in Redis first, then delivered until the
platform takes it.

Answering and delivering are two steps (docs/operations.md, "Delivery"):

1. `store`: a run that has its answer (or apology) stores it under the question id together
   with the answered marker (`codebot:answered:<id>`, which means "final message stored"), in
   one script, with the run's own token. One final message exists per question whatever RQ
   retries, redis-py retries (worker/ops/claims.py) and runs taken for dead do. The run
   accounts its tokens and records the thread's memory after its first attempt, once,
   delivered or not (worker/jobs/question_end.py).
2. `deliver`: the question's sink posts it: the placeholder replaced, the answer's chunks,
   👀 taken off and ✅ or ⚠️ put on. The run tries at once. When the platform refuses (5xx,
   `ratelimited`, a 429 longer than the client waits out, a timeout), the entry is due again
   after a backoff (`delivery_retry_initial_seconds`, doubling up to
   `delivery_retry_max_seconds`), and the housekeeper of every worker machine runs
   `deliver_due` every `delivery_check_seconds`. After `delivery_give_up_seconds` (24 h) the
   message is given up: logged as an error, counted, listed by `codebot status`. A platform
   saying the destination is gone for good (DeliveryFailed.retryable False) ends it at once.

One attempt at a time per question: an attempt holds the entry with its token and pushes the
entry's due time `delivery_lease_seconds` ahead. A worker killed mid-delivery leaves a lease
that expires, or that the reaper's failure callback hands over at once (`hand_over`). Sinks
are idempotent per question id (worker/jobs/sink.py), so an attempt after a partial one edits
what the first posted instead of posting again, and a streamed answer that broke midway is
replaced by the stored one.
"""

from __future__ import annotations

import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from redis import Redis

from config.settings import Settings
from worker.jobs.final_message import Final
from worker.jobs.question import Question, reference_id
from worker.jobs.queue import ANSWERED_KEY_PREFIX, ANSWERED_TTL_SECONDS
from worker.jobs.runtime import Runtime
from worker.jobs.sink import ConsoleSink, DeliveryFailed, ReplySink
from worker.ops.claims import new_token, run_script
from worker.ops.metrics import count

log = logging.getLogger("codebot.delivery")

ENTRY_KEY_PREFIX = "codebot:outbox:msg:"  # + question id -> hash: the final message and its delivery
DUE_KEY = "codebot:outbox:due"  # sorted set: question id -> when its next attempt is due (epoch s)
GAVE_UP_KEY = "codebot:outbox:undeliverable"  # sorted set: question id -> when it was given up
GAVE_UP_SHOWN_SECONDS = 7 * 24 * 3600  # `codebot status` lists what was given up this recently
DUE_BATCH = 200  # entries one pass looks at
JITTER = 0.2  # +-20 % on each backoff, so answers refused together are not retried together
SHOWN_ERROR_CHARS = 200
# A delivered answer's stored copy is kept this long (for a look in Redis); the answered marker,
# which alone keeps a question from being answered twice, lives ANSWERED_TTL_SECONDS.
DELIVERED_KEEP_SECONDS = 24 * 3600

Delivery = Literal["delivered", "pending", "undeliverable", "busy", "none"]
# delivered: the platform took it; pending: refused, due again later; undeliverable: given up;
# busy: another attempt holds it; none: nothing to deliver (already delivered, or never stored)

# KEYS: answered marker, entry, due set. ARGV: token, ttl ms, question, final, now, lease end,
# question id, platform. 2: stored now by this token; 1: stored by it before; 0: another final is.
_STORE = """
local held = redis.call('GET', KEYS[1])
if held then
  if held == ARGV[1] then return 1 end
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'question', ARGV[3], 'final', ARGV[4], 'stored_at', ARGV[5],
  'state', 'pending', 'lease', ARGV[1], 'attempts', '0', 'platform', ARGV[8])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[7])
return 2
"""
STORED_NOW = 2  # store's answer when this call stored it: its first attempt is already leased
# KEYS: entry, due set. ARGV: token, now, lease end, question id.
# 1: the attempt is this token's; 0: another attempt holds it; -1: nothing pending (its place in
# the due set goes too: an entry deleted or evicted while due would be looked at by every pass,
# and a batch full of them would hold up every delivery due after them).
_TAKE = """
if redis.call('HGET', KEYS[1], 'state') ~= 'pending' then
  redis.call('ZREM', KEYS[2], ARGV[4])
  return -1
end
local due = redis.call('ZSCORE', KEYS[2], ARGV[4])
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[1] then
  if due and tonumber(due) > tonumber(ARGV[2]) then return 0 end
  redis.call('HSET', KEYS[1], 'lease', ARGV[1])
end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
return 1
"""
# KEYS: entry, due set, given-up set. ARGV: question id, now, seconds the delivered entry is kept.
# An attempt that outlived its lease may land after another gave up: delivered is what stands.
_DONE = """
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'state', 'delivered', 'lease', '', 'delivered_at', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""
# KEYS: entry, due set. ARGV: token, question id, next attempt, error, attempts, now.
_AGAIN = """
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'lease', '', 'attempts', ARGV[5], 'last_error', ARGV[4],
  'last_attempt_at', ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
return 1
"""
# KEYS: entry, due set, given-up set. ARGV: question id, now, error, attempts, forget before, token.
# 0: the attempt had lost its lease (it outlived it, and another attempt took over, maybe
# delivered): that one's outcome stands.
_GIVE_UP = """
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[6] then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'undeliverable', 'lease', '', 'last_error', ARGV[3],
  'attempts', ARGV[4], 'gave_up_at', ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[5])
return 1
"""
# KEYS: entry, due set. ARGV: question id, now. A pending entry whose attempt died is due now.
_HAND_OVER = """
if redis.call('HGET', KEYS[1], 'state') ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], 'lease', '')
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
"""


def make_sink(runtime: Runtime, redis: Redis, question: Question) -> ReplySink:
    """The platform's sink from the runtime's registry (the console needs none)."""
    platform = question.target.platform
    if platform == "console":
        return ConsoleSink(redis, question)
    factory = runtime.sinks.get(platform)
    if factory is None:
        raise LookupError(f"no reply sink for {platform!r} in this worker's runtime (codebot/wiring.py)")
    return factory(runtime.settings, redis, question)


def entry_key(question_id: str) -> str:
    return ENTRY_KEY_PREFIX + question_id


def store(redis: Redis, settings: Settings, question: Question, final: Final, token: str) -> int:
    """Store the question's final message, unless another is stored already. STORED_NOW (2) when
    this call stored it: the entry is pending, its first attempt leased to `token` (the run
    delivers it at once, `deliver(..., stored=...)`, without reading it back); 1 when the same
    token stored it before (a retry: its entry may have moved on); 0 when another one is."""
    now = time.time()
    ttl_ms = round((ANSWERED_TTL_SECONDS + settings.delivery_give_up_seconds) * 1000)
    kept = question.model_copy(update={"history": []})  # what a sink needs, not the thread's past
    return int(
        run_script(
            redis,
            _STORE,
            [ANSWERED_KEY_PREFIX + question.id, entry_key(question.id), DUE_KEY],
            [
                token,
                ttl_ms,
                kept.model_dump_json(),
                final.to_json(),
                f"{now:.3f}",
                f"{now + settings.delivery_lease_seconds:.3f}",
                question.id,
                question.target.platform,
            ],
        )
    )


def deliver(
    redis: Redis,
    runtime: Runtime,
    question_id: str,
    token: str,
    sink: ReplySink | None = None,
    stored: tuple[Question, Final] | None = None,
) -> Delivery:
    """One attempt to post the stored final message of `question_id`; what came of it.

    `token` holds the attempt (the run's own token reuses the lease `store` gave it). `sink`:
    the run's own sink (its placeholder known in memory); otherwise one is made. `stored`: the
    question and final message that `store` has just stored with `token` (STORED_NOW): that
    store leased this first attempt, so it is neither taken again nor read back. Redis errors
    are the caller's (the entry stays pending and is tried again).
    """
    settings = runtime.settings
    if stored is None:
        taken = _take(redis, settings, question_id, token)
        if isinstance(taken, str):
            return taken
        fields = taken
    else:  # what _STORE wrote: no attempt yet
        fields = {"attempts": "0", "stored_at": f"{time.time():.3f}", "platform": stored[0].target.platform}
    failed_attempts = int(fields.get("attempts") or 0)
    try:
        # an entry this release cannot read (stored by another one, mid-deploy) fails like a
        # delivery: tried again, then given up and shown, never left pending unseen
        if stored is None:
            question = Question.model_validate_json(fields["question"])
            final = Final.from_json(fields["final"])
        else:
            question, final = stored
        final.send(sink if sink is not None else make_sink(runtime, redis, question))
    except DeliveryFailed as exc:
        return _not_delivered(redis, settings, fields, question_id, token, exc)
    except Exception as exc:  # a bug of ours, or a sink that cannot be made: tried again all the same
        if not failed_attempts:  # the traceback once, not on every attempt
            log.exception("delivery of %s crashed", question_id, extra={"job_id": question_id})
        failure = DeliveryFailed(f"{type(exc).__name__}: {exc}")
        return _not_delivered(redis, settings, fields, question_id, token, failure)
    _mark_delivered(redis, question_id, question.target.platform, final.kind, failed_attempts)
    return "delivered"


def _take(redis: Redis, settings: Settings, question_id: str, token: str) -> dict[str, str] | Delivery:
    """Lease the entry to `token` for one attempt and read it: its fields, or "busy" when another
    attempt holds it, "none" when there is none (delivered, given up, expired)."""
    now = time.time()
    key = entry_key(question_id)
    lease = [token, now, now + settings.delivery_lease_seconds, question_id]
    taken = int(run_script(redis, _TAKE, [key, DUE_KEY], lease))
    if taken <= 0:
        return "busy" if taken == 0 else "none"
    fields = _decoded(redis.hgetall(key))
    if "question" not in fields:  # expired between the two calls
        return "none"
    return fields


def _mark_delivered(redis: Redis, question_id: str, platform: str, kind: str, failed_attempts: int) -> None:
    """The entry done and the delivery counted in one round trip; logged when it took retries."""
    done = redis.pipeline(transaction=False)
    keys = (entry_key(question_id), DUE_KEY, GAVE_UP_KEY)
    done.eval(_DONE, 3, *keys, question_id, f"{time.time():.3f}", DELIVERED_KEEP_SECONDS)
    count(done, "codebot_deliveries_total", platform=platform, result="delivered")
    done.execute()
    if failed_attempts:
        log.info(
            "%s of %s delivered after %d failed attempt(s)",
            kind,
            question_id,
            failed_attempts,
            extra={"job_id": question_id, "ref": reference_id(question_id)},
        )


def _not_delivered(
    redis: Redis,
    settings: Settings,
    fields: dict[str, str],
    question_id: str,
    token: str,
    failure: DeliveryFailed,
) -> Delivery:
    now = time.time()
    attempts = int(fields.get("attempts") or 0) + 1
    error, retryable = str(failure)[:SHOWN_ERROR_CHARS], failure.retryable
    platform = fields.get("platform", "?")
    extra = {"job_id": question_id, "ref": reference_id(question_id)}
    age = now - float(fields.get("stored_at") or now)
    if not retryable or age + _backoff(settings, attempts) > settings.delivery_give_up_seconds:
        if not run_script(
            redis,
            _GIVE_UP,
            [entry_key(question_id), DUE_KEY, GAVE_UP_KEY],
            [question_id, f"{now:.3f}", error, attempts, f"{now - GAVE_UP_SHOWN_SECONDS:.3f}", token],
        ):
            return "busy"
        log.error(
            "gave up delivering the final message of %s after %d attempt(s) over %.0f s: %s",
            question_id,
            attempts,
            age,
            error,
            extra=extra,
        )
        count(redis, "codebot_deliveries_total", platform=platform, result="undeliverable")
        return "undeliverable"
    wait = _backoff(settings, attempts) * random.uniform(1 - JITTER, 1 + JITTER)
    wait = max(wait, failure.retry_after_seconds or 0.0)  # the platform's own Retry-After
    run_script(
        redis,
        _AGAIN,
        [entry_key(question_id), DUE_KEY],
        [token, question_id, f"{now + wait:.3f}", error, attempts, f"{now:.3f}"],
    )
    log.warning(
        "delivery of %s failed (attempt %d), trying again in %.1f s: %s",
        question_id,
        attempts,
        wait,
        error,
        extra=extra,
    )
    count(redis, "codebot_deliveries_total", platform=platform, result="retry")
    return "pending"


def _backoff(settings: Settings, attempts: int) -> float:
    doubled = settings.delivery_retry_initial_seconds * 2 ** min(attempts - 1, 32)
    return min(settings.delivery_retry_max_seconds, doubled)


def hand_over(redis: Redis, question_id: str) -> bool:
    """The run that stored this question's final message died (the reaper says so): its
    delivery is due now, whoever tries next, instead of after the dead run's lease."""
    return bool(
        run_script(redis, _HAND_OVER, [entry_key(question_id), DUE_KEY], [question_id, f"{time.time():.3f}"])
    )


def deliver_due(redis: Redis, runtime: Runtime) -> dict[str, Delivery]:
    """The housekeeper's pass: an attempt for every final message that is due, a few at once
    (`delivery_max_parallel`: an attempt may wait out a platform's rate limit)."""
    due = [text_of(raw) for raw in redis.zrangebyscore(DUE_KEY, "-inf", time.time(), start=0, num=DUE_BATCH)]
    if not due:
        return {}

    def attempt(question_id: str) -> Delivery:
        try:
            return deliver(redis, runtime, question_id, new_token())
        except Exception as exc:  # Redis failing mid-attempt: the entry stays pending
            log.warning("delivery of %s not attempted: %s", question_id, exc)
            return "busy"

    with ThreadPoolExecutor(
        max_workers=min(len(due), runtime.settings.delivery_max_parallel), thread_name_prefix="delivery"
    ) as pool:
        return dict(zip(due, pool.map(attempt, due), strict=True))


def _decoded(raw: dict[bytes, bytes]) -> dict[str, str]:
    return {text_of(k): text_of(v) for k, v in raw.items()}


def text_of(value: object) -> str:
    """A Redis value as text (the client returns bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)
