"""What an apology for a slow endpoint advises: settings that fit the speeds it was measured at.

"Raise CODEBOT_QUESTION_DEADLINE_SECONDS" alone does not converge: a new user raised it from
150 s to 600 s, then lowered it to 300 s, and SmolLM2-135M wrote prose at 2.2 tokens/s each
time. From the measured speeds (worker/agent/pacing.py) one turn costs

    prompt tokens / prompt speed + max_tokens / writing speed

and a question takes at least `QUESTION_TURNS` of them (one that reads code, one that answers),
with the margin every attempt gets. `advise()` names concrete values that fit that, preferring
the change that works within the deadline already set:

- writing is slow: a `CODEBOT_MODEL_MAX_TOKENS` the deadline can hold, else a short reply bound
  and the deadline that holds it;
- reading is slow: the deadline the prompt needs (a smaller reply bound does not help);
- the window leaves no room for a reply after the prompt: a larger window for the server;
- nothing fits (the prompt alone, or even a short reply, takes longer than any sensible
  deadline): it says so, and advises a faster model or server instead of a raise;
- the settings already fit: it says so, and advises no raise (the time went elsewhere).

Following the advice and failing again at the same speeds finds the settings fitting: the advice
never asks for a second raise for the same result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from worker.agent.model_errors import ADVICE
from worker.agent.pacing import ATTEMPT_MARGIN, UNKNOWN_CAP_TOKENS, Speeds

QUESTION_TURNS = 2  # a turn that reads code, a turn that answers
SHORT_REPLY_TOKENS = 300  # room for a tool call or a short answer
MIN_REPLY_TOKENS = 150  # below this a bound leaves no room for an answer worth reading
LONGEST_DEADLINE_SECONDS = 1800.0  # a chat question not answered in half an hour is not answered
TOKENS_STEP = 50  # advised reply bounds are round numbers, rounded down
SECONDS_STEP = 30  # advised deadlines are round numbers, rounded up


@dataclass(frozen=True)
class Situation:
    """What was measured and set when the time ran out."""

    speeds: Speeds
    prompt_tokens: int  # the last request's (estimated from its characters when not counted)
    reply_tokens: int  # the reply bound requests carried (before fitting to the time left)
    deadline_seconds: float  # CODEBOT_QUESTION_DEADLINE_SECONDS
    window_tokens: int = 0  # the model's context window; 0: unknown

    def prompt_seconds(self) -> float:
        return self.prompt_tokens / self.speeds.prompt_tps if self.speeds.prompt_tps > 0 else 0.0

    def turn_seconds(self, reply_tokens: int) -> float:
        return self.prompt_seconds() + reply_tokens / self.speeds.generation_tps

    def question_seconds(self, reply_tokens: int) -> float:
        return ATTEMPT_MARGIN * QUESTION_TURNS * self.turn_seconds(reply_tokens)

    def reply_room(self) -> int:
        """The tokens the window leaves for a reply after the prompt (a large number if unknown)."""
        return self.window_tokens - self.prompt_tokens if self.window_tokens else 1 << 30


def advise(situation: Situation) -> str:
    """What one turn needs here and which setting values would fit; "" when the writing speed
    was never measured (nothing to compute from)."""
    if situation.speeds.generation_tps <= 0:
        return ""
    # no bound sent (the endpoint refused both names): a reply as long as an unbounded one
    situation = replace(situation, reply_tokens=situation.reply_tokens or UNKNOWN_CAP_TOKENS)
    needs = _needs(situation)
    room = situation.reply_room()
    reply = min(situation.reply_tokens, max(room, 0))
    short = min(SHORT_REPLY_TOKENS, reply) if reply >= MIN_REPLY_TOKENS else MIN_REPLY_TOKENS
    if situation.question_seconds(short) > LONGEST_DEADLINE_SECONDS:
        reading = situation.prompt_seconds() * 2 > situation.turn_seconds(short)  # most of a turn
        key = "no_fit_prompt" if reading else "no_fit_writing"
        return ADVICE[key].format(
            needs=needs,
            prompt_time=_duration(situation.prompt_seconds()),
            tokens=short,
            turn_time=_duration(situation.turn_seconds(short)),
        )
    if room < MIN_REPLY_TOKENS:
        return _larger_window(situation, needs, room)
    if situation.question_seconds(situation.reply_tokens) <= situation.deadline_seconds:
        return ADVICE["fits"].format(needs=needs)
    within = _tokens_within(situation, situation.deadline_seconds)
    if within >= MIN_REPLY_TOKENS:
        return ADVICE["max_tokens"].format(
            needs=needs, tokens=within, turn_time=_duration(situation.turn_seconds(within))
        )
    if short < reply:
        return ADVICE["max_tokens_and_deadline"].format(
            needs=needs,
            tokens=short,
            turn_time=_duration(situation.turn_seconds(short)),
            seconds=_seconds_up(situation.question_seconds(short)),
        )
    return ADVICE["deadline"].format(needs=needs, seconds=_seconds_up(situation.question_seconds(reply)))


def _larger_window(situation: Situation, needs: str, room: int) -> str:
    """A window that holds the prompt and the reply bound, and the settings that make its turns fit."""
    settings = []
    reply = situation.reply_tokens or SHORT_REPLY_TOKENS
    if reply > SHORT_REPLY_TOKENS and situation.question_seconds(reply) > situation.deadline_seconds:
        reply = SHORT_REPLY_TOKENS
        settings.append(f"CODEBOT_MODEL_MAX_TOKENS={reply}")
    deadline = _seconds_up(situation.question_seconds(reply))
    if deadline > situation.deadline_seconds:
        settings.append(f"CODEBOT_QUESTION_DEADLINE_SECONDS={deadline}")
    extra = ADVICE["and_set"].format(settings=" and ".join(settings)) if settings else ""
    window = _window_for(situation.prompt_tokens + reply)
    return ADVICE["window"].format(
        needs=needs, window=situation.window_tokens, room=room, tokens=window, extra=extra
    )


def _needs(situation: Situation) -> str:
    speeds = situation.speeds
    reading = (
        ADVICE["reading"].format(tokens=situation.prompt_tokens, speed=speeds.prompt_tps)
        if speeds.prompt_tps > 0
        else ""
    )
    return ADVICE["needs"].format(
        turn_time=_duration(situation.turn_seconds(situation.reply_tokens)),
        reading=reading,
        tokens=situation.reply_tokens,
        speed=speeds.generation_tps,
        turns=QUESTION_TURNS,
    )


def _tokens_within(situation: Situation, seconds: float) -> int:
    """The largest round reply bound whose question fits in `seconds`, within the window."""
    per_turn = seconds / (ATTEMPT_MARGIN * QUESTION_TURNS) - situation.prompt_seconds()
    tokens = int(per_turn * situation.speeds.generation_tps) // TOKENS_STEP * TOKENS_STEP
    return min(tokens, situation.reply_room() // TOKENS_STEP * TOKENS_STEP)


def _seconds_up(seconds: float) -> int:
    return max(SECONDS_STEP, math.ceil(seconds / SECONDS_STEP) * SECONDS_STEP)


def _window_for(tokens: int) -> int:
    """The power of two servers are usually given that holds `tokens` (4,096, 8,192, ...)."""
    return 1 << max(12, math.ceil(math.log2(max(tokens, 1))))


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"~{max(seconds, 1):.0f} s"
    if seconds < 5400:
        return f"~{math.ceil(seconds / 60)} min"
    return f"~{seconds / 3600:.1f} h"
