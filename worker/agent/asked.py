"""What the agent needs of a question: its words and the thread's earlier turns.

The question model that travels through Redis (worker.jobs.question.Question) sits in a layer
above the agent; it satisfies these protocols, so the agent never imports the jobs layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class PastTurn(Protocol):
    @property
    def question(self) -> str: ...

    @property
    def answer(self) -> str: ...


class AskedQuestion(Protocol):
    @property
    def text(self) -> str: ...

    @property
    def history(self) -> Sequence[PastTurn]: ...
