"""The one intake: what happens to a question between a chat adapter and the queue.

Both adapters (Slack, Discord) decide whether a platform event is a question, translate it
into an `Ask` and render the `Outcome`; everything in between is here, the same for both:

1. dedupe: one question per user message whatever the platform delivers (retries, the same
   message as two events, a gateway replay): the job id, derived from the message identity,
   is claimed in Redis before anything else, with a token of this delivery's own so that
   redis-py's retry after a stall is not mistaken for a duplicate (worker/ops/claims.py);
2. the question's words: `repo:NAME` taken out, secrets redacted; an empty question or a
   help word (`help`, `?`, `hi`, `hello`) gets the help text instead;
3. scope: the `repo:` names, else those the thread kept, checked against the channel's
   allow-list;
4. limits, in this order: the daily token budget, the queue depth, the asker's rate limit
   (after dedupe, so a duplicate never counts twice);
5. thread memory: a question written in a thread carries the thread's earlier turns; the
   thread remembers the asker, the last `repo:` named, and (for a thread the answer opens)
   the channel it was opened in, so adapters recognise follow-ups;
6. the enqueue, unique per job id.

Whatever a platform delivers is made storable first (`storable`): an unpaired surrogate (valid
JSON `\ud800`) cannot be encoded as UTF-8, so it would fail the enqueue, and control characters
(other than newline and tab) carry nothing a question needs; both become U+FFFD.

Nothing that fails before the enqueue keeps the dedupe claim: the claim is released, so the
platform's redelivery gets another try (unless Redis does not answer at all: then the release
would only keep the asker waiting, and the asker asks again). Redis unreachable (or refusing writes): the asker is
told once per message (an in-process memory, since Redis cannot dedupe then); redis-py
reconnects by itself when it is back. Any other failure (a bug of ours): logged with its
traceback, the asker told once per message that the question could not be taken.
Every call here blocks on Redis: an async adapter runs it in a worker thread.
docs/architecture.md lists the choices made where the two former copies differed.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import redis as redis_lib
from redis import Redis

from bot import texts
from config.repos import Whitelist
from config.settings import Settings
from worker.jobs.limits import check_rate, depth_if_full
from worker.jobs.question import Question, ReplyTarget, event_identity
from worker.jobs.queue import QUESTION_RESULT_TTL_SECONDS, enqueue_question, is_pending, was_answered
from worker.jobs.scope import redact_and_extract_repos, resolve_scope
from worker.jobs.threads import THREAD_TTL_SECONDS, load_turns
from worker.ops.accounting import BUDGET_SPENT_MESSAGE, budget_spent
from worker.ops.claims import claim, new_token, release
from worker.ops.redis_connection import RedisUnavailable

log = logging.getLogger("codebot.intake")

SEEN_KEY_PREFIX = "codebot:seen:"  # + job id: one reply per user message, whatever it is
SEEN_TTL_SECONDS = QUESTION_RESULT_TTL_SECONDS  # longer than any platform's redelivery
# + platform + ":thread:" + conversation -> hash: `asker:<user id>`, `repos` (the last `repo:`
# names), `parent` (the channel a thread the answer opened was started in)
THREAD_META_PREFIX = "codebot:"
HELP_WORDS = {"help", "?", "hi", "hello"}
RECENT_MAX_ENTRIES = 10_000  # in-process memory of messages told "Redis is down"
# Any failure of Redis, not only a lost connection: a server that refuses writes (OOM, MISCONF, a
# read-only replica after a failover) gets the asker a "try again" too, saying which (texts.queue_trouble).
REDIS_DOWN = (redis_lib.RedisError, RedisUnavailable, OSError)
# Redis not answering at all: a release would only wait out another timeout before the asker is told.
UNREACHABLE = (redis_lib.ConnectionError, redis_lib.TimeoutError, RedisUnavailable, OSError)
# What no stored question may hold: unpaired surrogates (not encodable as UTF-8), C0 controls but
# newline and tab, DEL and the C1 controls.
_UNSTORABLE = re.compile("[\ud800-\udfff\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Ask:
    """One user message (or command) that is a question, in platform-neutral terms."""

    asker: str  # the platform's user id
    text: str  # the user's words, the bot's own mention removed (repo: filters still in)
    target: ReplyTarget  # where the answer goes; its channel is the one allow-lists name
    identity: tuple[str, ...]  # the platform's message identity, e.g. (channel, ts): the job id
    conversation: str | None  # thread-memory key of the thread the answer goes in; None: no thread
    in_thread: bool = False  # written inside an existing thread: its history and kept repos apply
    opens_thread: bool = False  # the answer starts this thread (its parent channel is remembered)
    attached_files: int = 0  # files the event says the message carries (the worker reads them)

    @property
    def job_id(self) -> str:
        return event_identity(self.target.platform, *self.identity)


@dataclass(frozen=True)
class Outcome:
    """What the adapter shows: nothing (a duplicate), 👀 (enqueued), or a reply in place."""

    kind: Literal["enqueued", "duplicate", "reply"]
    text: str = ""
    question: Question | None = None


@dataclass
class _Recent:
    """A bounded set, for telling an asker once that Redis is down (Redis can't dedupe then)."""

    keys: OrderedDict[str, None] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def first(self, key: str) -> bool:
        with self.lock:
            if key in self.keys:
                return False
            self.keys[key] = None
            while len(self.keys) > RECENT_MAX_ENTRIES:
                self.keys.popitem(last=False)
            return True


def help_reply(text: str, is_dm: bool) -> str | None:
    """The help to give instead of answering, or None when `text` is a question."""
    if text and text.lower().strip("!.") not in HELP_WORDS:
        return None
    if is_dm:  # nobody mentioned anybody in a DM: say how DMs work instead
        return f"{texts.HELP}\n{texts.HELP_IN_DM}"
    return texts.HELP if text else texts.EMPTY_MENTION


def storable(text: str) -> str:
    """`text` with what cannot be stored or means nothing in a question replaced by U+FFFD."""
    return _UNSTORABLE.sub("\ufffd", text)


def storable_ask(ask: Ask) -> Ask:
    """The Ask with every text a platform sent made storable (see `storable`)."""
    target = ask.target.model_copy(
        update={
            name: storable(value)
            for name, value in ask.target.model_dump().items()
            if isinstance(value, str) and name != "platform"
        }
    )
    return dataclasses.replace(
        ask,
        asker=storable(ask.asker),
        text=storable(ask.text),
        target=target,
        identity=tuple(storable(part) for part in ask.identity),
        conversation=storable(ask.conversation) if ask.conversation is not None else None,
    )


class Intake:
    """Shared by Slack mentions, DMs and follow-ups, Discord's too, and `/codebot ask`."""

    def __init__(self, settings: Settings, whitelist: Whitelist, redis: Callable[[], Redis]) -> None:
        self.settings = settings
        self.whitelist = whitelist
        self.redis = redis  # called per use: an adapter may connect lazily
        self._told_unavailable = _Recent()

    # --- what adapters ask before deciding ---------------------------------------------------

    def quick_refusal(self, text: str, channel_key: str, is_dm: bool) -> str | None:
        """Help or a scope refusal, without Redis (a thread's kept repos are not consulted):
        for a command that must answer privately before it defers."""
        cleaned, requested = redact_and_extract_repos(text)
        helped = help_reply(cleaned, is_dm)
        if helped is not None:
            return helped
        return resolve_scope(self.whitelist, channel_key, requested).refusal

    def asked_before(self, platform: str, conversation: str, asker: str) -> bool:
        """Did `asker` already ask in this thread? Raises on Redis failure (REDIS_DOWN)."""
        return bool(self.redis().hexists(_meta_key(platform, conversation), f"asker:{asker}"))

    def already_answered(self, question_id: str) -> bool:
        """Is the question's final message stored already? False when Redis cannot tell."""
        try:
            return was_answered(self.redis(), question_id)
        except REDIS_DOWN:
            return False

    def thread_parent(self, platform: str, conversation: str) -> str | None:
        """The channel a thread opened by an answer was started in; None for any other thread.
        Raises on Redis failure (REDIS_DOWN)."""
        raw = self.redis().hget(_meta_key(platform, conversation), "parent")
        return raw.decode() if isinstance(raw, bytes) else raw

    # --- the intake ---------------------------------------------------------------------------

    def submit(self, ask: Ask) -> Outcome:
        """One question per user message: dedupe, scope, limits, thread memory, enqueue."""
        ask = storable_ask(ask)
        token = new_token()
        try:
            return self._submit(ask, token)
        except REDIS_DOWN as exc:
            log.warning("Redis unavailable, question %s refused: %s", ask.job_id, exc)
            if not isinstance(exc, UNREACHABLE):  # one that answers may release; a hung one would
                self._release(ask, token)  # hold the asker's "try again" for another timeout
            if self._told_unavailable.first(ask.job_id):
                return Outcome("reply", texts.queue_trouble(exc))
            return Outcome("duplicate")
        except Exception:  # a bug of ours: never silence, never a claim kept for nothing
            log.exception("question %s could not be taken", ask.job_id)
            self._release(ask, token)
            if self._told_unavailable.first(ask.job_id):
                return Outcome("reply", texts.INTAKE_FAILED)
            return Outcome("duplicate")

    def _release(self, ask: Ask, token: str) -> None:
        """Give the message's dedupe claim up (its question is not queued): a redelivery may try again."""
        try:
            release(self.redis(), SEEN_KEY_PREFIX + ask.job_id, token)
        except REDIS_DOWN as exc:  # it expires by itself; the asker was told
            log.warning("could not release the claim of %s: %s", ask.job_id, exc)

    def _submit(self, ask: Ask, token: str) -> Outcome:
        redis, platform, job_id = self.redis(), ask.target.platform, ask.job_id
        if not claim(redis, SEEN_KEY_PREFIX + job_id, token, SEEN_TTL_SECONDS):
            return Outcome("duplicate")  # a retry, or the other event of the same message
        text, requested = redact_and_extract_repos(ask.text)
        helped = help_reply(text, ask.target.is_dm)
        if helped is not None:
            return Outcome("reply", helped)
        meta = _meta_key(platform, ask.conversation) if ask.conversation else None
        kept = _kept_repos(redis, meta) if meta and ask.in_thread and not requested else []
        scope = resolve_scope(self.whitelist, ask.target.channel_key, requested or kept)
        if scope.refusal:
            return Outcome("reply", scope.refusal)
        refusal = self._limits(redis, f"{platform}:{ask.asker}")
        if refusal:
            return Outcome("reply", refusal)
        target = ask.target
        history = (
            load_turns(redis, platform, target.channel, target.thread)
            if ask.in_thread and target.thread
            else []
        )
        question = Question(
            id=job_id,
            asker=ask.asker,
            target=target,
            text=text,
            repos=scope.repos,
            history=history,
            attached_files=ask.attached_files,
        )
        if meta is not None:  # before the enqueue: a follow-up is known before the first answer
            _remember(redis, meta, ask, requested)
        enqueued = enqueue_question(redis, question, self.settings)
        # The message is ours (claimed above), so a job already there under its id and still
        # waiting is our own enqueue, run by Redis before redis-py retried it after a stall.
        if enqueued.duplicate and not is_pending(redis, job_id):
            return Outcome("duplicate")
        log.info(
            "question queued id=%s platform=%s channel=%s position=%s",
            job_id,
            platform,
            target.channel,
            enqueued.position,
        )
        return Outcome("enqueued", question=question)

    def _limits(self, redis: Redis, user_key: str) -> str | None:
        """Budget, queue depth, then the asker's rate: the first that refuses, or None."""
        if budget_spent(redis, self.settings):
            return BUDGET_SPENT_MESSAGE
        depth = depth_if_full(redis, self.settings)
        if depth is not None:
            return texts.QUEUE_FULL.format(depth=depth)
        wait = check_rate(redis, user_key, self.settings)
        if wait is not None:
            return texts.RATE_LIMITED.format(seconds=wait)
        return None


def _meta_key(platform: str, conversation: str) -> str:
    # conversation: Slack `<channel>:<thread ts>` (a ts is unique only in its channel), Discord
    # the thread's channel id. Stored keys keep the format of earlier releases.
    return f"{THREAD_META_PREFIX}{platform}:thread:{conversation}"


def _kept_repos(redis: Redis, meta: str) -> list[str]:
    raw = redis.hget(meta, "repos")
    text = raw.decode() if isinstance(raw, bytes) else (raw or "")
    return [name for name in text.split(",") if name]


def _remember(redis: Redis, meta: str, ask: Ask, requested: list[str]) -> None:
    pipe = redis.pipeline()
    pipe.hset(meta, f"asker:{ask.asker}", "1")
    if ask.opens_thread:
        pipe.hset(meta, "parent", ask.target.channel)
    if requested:  # the latest `repo:` named in the thread holds for the next follow-ups
        pipe.hset(meta, "repos", ",".join(requested))
    pipe.expire(meta, THREAD_TTL_SECONDS)
    pipe.execute()
