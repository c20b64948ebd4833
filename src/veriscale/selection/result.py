"""The pick and everything behind it: the :class:`Selection` a selection returns, and its JSON.

    from veriscale.selection.select import select       # Selection is importable from there too
    from veriscale.selection.result import Selection

    sel = select(None, candidates, verifier=verifier)
    sel.best.id, sel.confidence, sel.decided, sel.reason.text
    sel.ranking, sel.scores, sel.criteria_scores[sel.index]
    sel.pair_orders, sel.injection_suspected
    sel.to_dict()                                       # JSON-ready, the tournament's judgements included

:mod:`veriscale.selection.select` runs the plan and assembles this record; it only holds what the
run found and reads it out (no model calls, no tournament).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from veriscale.data.model import Candidate, Task
from veriscale.engine.sync_facade import Usage
from veriscale.selection.core.position_bias import pair_orders
from veriscale.selection.core.tournament import TournamentResult
from veriscale.selection.plan import SelectionPlan
from veriscale.selection.reason import Reason

__all__ = ["Selection"]


@dataclass
class Selection:
    """The pick and everything behind it; candidate indices refer to ``candidates``.

    ``scores``: normalised Bradley–Terry win mass (pointwise: share of others beaten), summing
    to 1. ``confidence``: posterior probability that the pick is the best (1.0 for a single
    distinct candidate, None for pointwise). ``criteria_scores[i]``: candidate i's mean reward
    per criterion over the comparisons it took part in. ``calls_saved``: model calls adaptive
    mode did not make compared with the full schedule (negative if extra repeats cost more).
    """

    task: Task | None
    candidates: list[Candidate]
    method: str
    index: int
    scores: tuple[float, ...]
    ranking: tuple[int, ...]
    confidence: float | None
    reason: Reason
    ties: tuple[tuple[int, int], ...]
    n_comparisons: int
    n_judgements: int
    usage: Usage
    criteria_scores: list[dict[str, float | None]]
    min_confidence: float
    plan: SelectionPlan
    adaptive: bool = False
    judgements_saved: int = 0
    calls_saved: int = 0
    stop_reason: str = "plan complete"
    notes: list[str] = field(default_factory=list)
    tournament: TournamentResult | None = None
    #: per candidate, the detector's span (a dict) or None; all None with the detector off
    injection: list[dict[str, Any] | None] = field(default_factory=list)
    injection_detect: bool = False
    injection_policy: str = "none"
    #: the cost controller's account (``BudgetOutcome.to_dict()``: budget, spent, steps), None without a budget
    budget: dict[str, Any] | None = None

    @property
    def injection_suspected(self) -> bool | None:
        """True when any candidate reads as an injection (None: the detector was off)."""
        return any(h is not None for h in self.injection) if self.injection_detect else None

    @property
    def pair_orders(self) -> list[dict[str, Any]]:
        """Per judged pair, mean P(a ≻ b) with a shown first and with b shown first, and whether
        the two orders flip the verdict (:mod:`veriscale.selection.core.position_bias`)."""
        return pair_orders(self.tournament.comparisons) if self.tournament is not None else []

    @property
    def best(self) -> Candidate:
        return self.candidates[self.index]

    @property
    def decided(self) -> bool:
        """True when the confidence reaches ``min_confidence`` (pointwise picks never are)."""
        return self.confidence is not None and self.confidence >= self.min_confidence

    def _images_of(self, i: int) -> dict[str, Any]:
        """The frames every verdict over candidate ``i`` saw (none: no key, so text picks are unchanged)."""
        pool = self.plan.pool if self.plan is not None else None
        if pool is None or not pool.images or not pool.images[i]:
            return {}
        return {"images": [img.shown() for img in pool.images[i]]}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the tournament's judgements under ``"tournament"``)."""
        return {
            "task": None if self.task is None else {"id": self.task.id, "text": self.task.text},
            "method": self.method,
            "index": self.index,
            "best": _candidate_ref(self.best),
            "confidence": self.confidence,
            "min_confidence": self.min_confidence,
            "decided": self.decided,
            "reason": self.reason.to_dict(),
            "ranking": [
                {
                    "rank": rank + 1,
                    "index": i,
                    **_candidate_ref(self.candidates[i]),
                    "score": self.scores[i],
                    "criteria": self.criteria_scores[i],
                    **self._injection_of(i),
                    **self._images_of(i),
                }
                for rank, i in enumerate(self.ranking)
            ],
            "ties": [list(t) for t in self.ties],
            "n_comparisons": self.n_comparisons,
            "n_judgements": self.n_judgements,
            "usage": self.usage.to_dict(),
            "adaptive": self.adaptive,
            "judgements_saved": self.judgements_saved,
            "calls_saved": self.calls_saved,
            "stop_reason": self.stop_reason,
            "notes": list(self.notes),
            "plan": self.plan.to_dict(),
            "tournament": None if self.tournament is None else self.tournament.to_dict(),
            "pair_orders": self.pair_orders,
            "position_bias": [[o["a"], o["b"]] for o in self.pair_orders if o["position_bias"]],
            "budget": self.budget,
            "injection_suspected": self.injection_suspected,
            "injection": {"detector": "on" if self.injection_detect else "off", "policy": self.injection_policy,
                          "suspects": [i for i, h in enumerate(self.injection) if h is not None]},
        }

    def _injection_of(self, i: int) -> dict[str, Any]:
        if not self.injection_detect:
            return {"injection_suspected": None, "injection_span": None}
        span = self.injection[i] if i < len(self.injection) else None
        return {"injection_suspected": span is not None, "injection_span": span}



def _candidate_ref(candidate: Candidate) -> dict[str, Any]:
    return {"id": candidate.id, "source": candidate.source, "labels": candidate.labels}
