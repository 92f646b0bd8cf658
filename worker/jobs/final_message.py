"""A question's one final message, an answer or an apology: how it is posted through a sink,
and the JSON the outbox (worker/jobs/outbox.py) stores it as until the platform takes it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from worker.agent.citations import Source
from worker.jobs.sink import Answer, ConsoleSink, ReplySink


@dataclass(frozen=True)
class Final:
    """A question's one final message: the cited answer, or an apology."""

    answer: Answer | None = None
    apology: str = ""
    outcome: str = "failed"  # an apology's kind (worker/jobs/outcomes.py): not_an_answer, no_snapshot…

    @property
    def kind(self) -> str:
        return "answer" if self.answer is not None else "apology"

    def send(self, sink: ReplySink) -> None:
        """Post it through `sink` (returns once posted, else raises DeliveryFailed)."""
        if self.answer is not None:
            sink.answer(self.answer)
        elif isinstance(sink, ConsoleSink):  # the terminal's exit code says which kind it was
            sink.failed(self.apology, self.outcome)
        else:
            sink.failed(self.apology)

    def to_json(self) -> str:
        if self.answer is None:
            return json.dumps({"kind": "apology", "text": self.apology, "outcome": self.outcome})
        answer = self.answer
        return json.dumps(
            {
                "kind": "answer",
                "markdown": answer.markdown,
                "sources": [asdict(source) for source in answer.sources],
                "unverified": answer.unverified,
                "ref": answer.ref,
                "partial": answer.partial,
                "cut_off": answer.cut_off,
            }
        )

    @classmethod
    def from_json(cls, raw: str) -> Final:
        data = json.loads(raw)
        if data["kind"] != "answer":  # an earlier release stored no outcome: a failure
            return cls(apology=data["text"], outcome=data.get("outcome", "failed"))
        return cls(
            answer=Answer(
                markdown=data["markdown"],
                sources=[Source(**source) for source in data["sources"]],
                unverified=data["unverified"],
                ref=data["ref"],
                partial=data["partial"],
                cut_off=data.get("cut_off", False),
            )
        )
