"""How a session ended and what it cost: the one result type of the agent loop and the executors.

The agent loop (:mod:`.agent`) returns a :class:`SessionOutcome`; an executor (:mod:`.executors`)
returns a :class:`SessionResult`, the same fields plus the phase, the executor and the files::

    outcome = agent.run(system, user, record=record)             # SessionOutcome(status="completed", ...)
    result = SessionResult.from_outcome(outcome, phase="resolve", executor="builtin",
                                        transcript_path="t.jsonl")
    result.ok, result.to_dict()["calls"]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(kw_only=True)
class SessionOutcome:
    """How a session ended and what it cost."""

    status: str  # "completed" | "failed"
    reason: str
    steps: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    nudged: bool = False
    recovered_calls: int = 0
    record_path: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(kw_only=True)
class SessionResult(SessionOutcome):
    """A :class:`SessionOutcome` of one protocol phase, run by a named executor."""

    phase: str
    executor: str
    tokens_reported: bool = True
    transcript_path: str | None = None

    @classmethod
    def from_outcome(cls, outcome: SessionOutcome, **more: Any) -> "SessionResult":
        """``outcome``'s fields plus ``more`` (``phase``, ``executor``, ...; ``more`` wins)."""
        base = {f.name: getattr(outcome, f.name) for f in fields(SessionOutcome)}
        return cls(**{**base, **more})
