"""What one step of the budget controller did: :class:`BudgetStep` (the granularity it chose, a
ring, a pivot, repeats or criteria), shared by the controller and the scale planner::

    BudgetStep("pivot", "pivot r2 meets 3 contenders", "…", judgements=3, spent=18, left=42,
               confidence=0.71).to_dict()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BudgetStep:
    """One escalation step: what it judged and why, what it spent and what was left."""

    kind: str           # granularity (the plan's G, before any call), ring, pivot, repeat, criteria
    added: str
    why: str
    judgements: int
    spent: int
    left: int
    confidence: float | None  # None: no judgement yet (the granularity step)

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.kind, "added": self.added, "why": self.why, "judgements": self.judgements,
                "spent": self.spent, "left": self.left,
                "confidence": None if self.confidence is None else round(self.confidence, 4)}
