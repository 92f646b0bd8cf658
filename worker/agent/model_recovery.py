"""What a failed model attempt leads to: the call asks again (at once, or after a wait), or fails.

`Recovering` is mixed into `ModelClient` (worker/agent/model.py), on top of `RequestShaping`
(worker/agent/request_shape.py). `ModelClient.complete` is the loop of attempts; after one
fails, the method named for what went wrong decides what comes next, each recovery taken at
most as often as `Recoveries` (the call's record of them) allows:

- `_after_cut`: a stream cut off mid-reply is asked again after a backoff while there is time;
  else the part that came is the answer, marked cut off.
- `_after_empty_stream`: a stream that ended empty is asked again at once, once more if the
  endpoint streamed before, else without streaming from now on.
- `_after_error`, in this order: a connection the server hung up on is tried once more at once;
  a context overflow once, trimmed; a refused optional field is left out (at most
  MAX_FALLBACKS_PER_CALL); a retryable error (`retry_wait_seconds`) waits and counts as a
  retry; anything else becomes the asker's `ModelFailure`.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field

import httpx2
import openai

from worker.agent import model_errors
from worker.agent.context import measured_ratio
from worker.agent.endpoint_memory import STREAM, TOOL_CHOICE_AUTO
from worker.agent.model_errors import ModelFailure, classify, context_overflow_of, failure
from worker.agent.model_fit import MIN_ATTEMPT_SECONDS, Shaped
from worker.agent.request_shape import RequestShaping

log = logging.getLogger("codebot.model")

MAX_FALLBACKS_PER_CALL = 6  # refused fields dropped within one call (there are fewer features)


@dataclass(frozen=True)
class Retry:
    """Ask again: at once, as the same attempt (a recovery that costs no retry), or after `wait`
    seconds as the next attempt (one of model_max_retries)."""

    wait: float | None = None


AT_ONCE = Retry()


@dataclass
class Recoveries:
    """What one call has tried so far: the retries it counts and the recoveries taken once."""

    retries: int  # model_max_retries: the attempts after the first that a wait may buy
    attempt: int = 0
    suspected: set[str] = field(default_factory=set)  # dropped on suspicion; refused if that works
    fallbacks: int = 0
    context_retried: bool = False
    empty_retried: bool = False
    hung_up: bool = False

    def take(self, retry: Retry) -> None:
        """Wait as `retry` says, before the attempt it counts as."""
        if retry.wait is not None:
            time.sleep(retry.wait)
            self.attempt += 1


class Recovering(RequestShaping):
    measured: bool

    def _time_to_wait(self, wait: float, tried: Recoveries, deadline: float) -> bool:
        """A retry is left, and after `wait` there is still time for an attempt."""
        return tried.attempt < tried.retries and self.clock() + wait + MIN_ATTEMPT_SECONDS < deadline

    def _after_cut(self, tried: Recoveries, deadline: float) -> Retry | None:
        """After a stream cut off mid-reply: a retry, or None to answer with the part that came."""
        wait = min(0.5 * 2**tried.attempt, 8.0)
        if self._time_to_wait(wait, tried, deadline):
            log.info("model reply cut off mid-stream; asking again in %.1f s", wait, extra=self.log_extra)
            return Retry(wait)
        log.warning("model reply cut off mid-stream, no time to ask again", extra=self.log_extra)
        return None

    def _after_empty_stream(self, tried: Recoveries) -> Retry:
        if self.memory.confirmed(STREAM) and not tried.empty_retried:
            tried.empty_retried = True  # it streamed before: once may be a glitch
            return AT_ONCE
        self.memory.refuse(STREAM, "a streamed reply ended empty")
        return AT_ONCE

    def _after_error(self, exc: Exception, shaped: Shaped, tried: Recoveries, deadline: float) -> Retry:
        """After the model's failure (an SDK error, a body we could not parse): a retry, or the
        ModelFailure raised when nothing is left to try."""
        if not tried.hung_up and hung_up(exc):
            tried.hung_up = True  # most likely a pooled connection the server had dropped
            return AT_ONCE
        overflow = context_overflow_of(exc)
        if overflow is not None and not tried.context_retried:
            tried.context_retried = True
            self._learn_overflow(overflow, shaped.sent_chars, exc)
            return AT_ONCE
        dropped = (
            self._fallback(exc, shaped.features, tried.suspected)
            if tried.fallbacks < MAX_FALLBACKS_PER_CALL
            else None
        )
        if dropped:
            tried.fallbacks += 1
            return AT_ONCE
        self._note_abandoned(exc, shaped)
        wait = retry_wait_seconds(exc, tried.attempt)
        if wait is not None and self._time_to_wait(wait, tried, deadline):
            log.info(
                "model call failed (%s); retrying in %.1f s", type(exc).__name__, wait, extra=self.log_extra
            )
            return Retry(wait)
        raise self._with_tokens(self._failure(exc, shaped)) from exc

    def _failure(self, exc: Exception, shaped: Shaped) -> ModelFailure:
        found = classify(exc)
        if isinstance(exc, ModelFailure):
            return found
        if found.kind in ("timeout", "unreachable") and getattr(exc, "_codebot_cut", False):
            found = failure("cut", found.detail, seconds=getattr(exc, "_codebot_seconds", 0.0))
        if found.kind == "refused" and TOOL_CHOICE_AUTO in self.memory.facts.refused:
            found = failure("no_tool_calls", found.detail, found.status)
        found = self._located(found)
        if found.kind in ("timeout", "cut"):
            found = self._with_time_hint(
                found, getattr(exc, "_codebot_seconds", 0.0), int(shaped.sent_chars / self.chars_per_token)
            )
        log.warning(
            "model endpoint failure kind=%s status=%s: %s",
            found.kind,
            found.status,
            found.detail or "(no error text)",
            extra=self.log_extra,
        )
        return found

    def _learn_overflow(
        self, overflow: model_errors.ContextOverflow, sent_chars: int, exc: Exception
    ) -> None:
        if overflow.prompt_tokens:
            ratio = measured_ratio(sent_chars, overflow.prompt_tokens)
            if ratio:
                self.chars_per_token, self.measured = ratio, True
        window = overflow.window_tokens
        if window is None:  # the server did not say: assume what we sent was a quarter too much
            current = self.window()
            estimated = current.tokens or int(sent_chars / self.chars_per_token)
            window = max(int(estimated * 0.75), 512)
        if not self.settings.model_context_tokens:
            self.memory.remember_context(window, "the server's context-length error")
        log.warning(
            "model context window exceeded (window %s tokens): trimming and retrying once: %s",
            window,
            model_errors.clean_detail(
                model_errors.error_text(exc) if isinstance(exc, openai.APIStatusError) else str(exc)
            ),
            extra=self.log_extra,
        )


def hung_up(exc: Exception) -> bool:
    """The server closed the connection without a byte of response: sent once more, on a fresh
    connection, even with model_max_retries 0. A keep-alive connection a server (or a proxy)
    dropped while it sat in the pool fails just so, and the request then never reached it."""
    cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
    return isinstance(cause, httpx2.RemoteProtocolError) and "without sending a response" in str(cause)


def retry_wait_seconds(exc: Exception, attempt: int) -> float | None:
    """How long to wait before retrying after `exc`, or None when it is not worth retrying.

    As the SDK would: connection errors, timeouts, 408, 409, 429 and 5xx are retried, after the
    server's Retry-After (or retry-after-ms), else after 0.5 s doubling up to 8 s.
    """
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers
        status = exc.response.status_code
        if headers.get("x-should-retry") == "false" or not (status in (408, 409, 429) or status >= 500):
            return None
        for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
            try:
                return max(0.0, float(headers.get(name, "")) * scale)
            except ValueError:
                continue
    elif not isinstance(exc, openai.APIConnectionError):
        return None  # a reply we could not parse: asking again will not help
    return min(0.5 * 2**attempt, 8.0) * (1 - 0.25 * random.random())
