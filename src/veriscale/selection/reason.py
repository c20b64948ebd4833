"""A short readable reason for a pick: which criteria separated the winner from the runner-up.

Inputs are each candidate's per-criterion reward (mean over the comparisons it took part in)::

    r = explain("run-3", "run-1", {"Output": 0.71, "Errors": 0.64}, {"Output": 0.58, "Errors": 0.65},
                head_to_head=0.66, confidence=0.93)
    r.text   # 'run-3 over run-1: Output +0.13 (0.71 vs 0.58); Errors even (-0.01);
             #  head-to-head P(run-3 wins) = 0.66; confidence 0.93 that run-3 is the best'
    r.gaps   # per criterion, largest winner advantage first

A gap within ``even_within`` (default 0.02 on the [0, 1] reward scale, under one letter grade on
the default 20-label scale) is reported as even; criteria where the runner-up led are named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

EVEN_WITHIN = 0.02


@dataclass(frozen=True)
class CriterionGap:
    """One criterion's mean reward for the winner and the runner-up (None when unscored)."""

    criterion: str
    winner: float | None
    runner_up: float | None

    @property
    def gap(self) -> float | None:
        """Winner minus runner-up; positive when the winner was graded higher."""
        if self.winner is None or self.runner_up is None:
            return None
        return self.winner - self.runner_up


@dataclass(frozen=True)
class Reason:
    """Why the winner was picked over the runner-up, as numbers and one paragraph of text."""

    winner: str
    runner_up: str | None
    gaps: tuple[CriterionGap, ...]
    head_to_head: float | None
    confidence: float | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "winner": self.winner,
            "runner_up": self.runner_up,
            "criteria": [
                {"criterion": g.criterion, "winner": g.winner, "runner_up": g.runner_up, "gap": g.gap}
                for g in self.gaps
            ],
            "head_to_head": self.head_to_head,
            "confidence": self.confidence,
            "text": self.text,
        }


def explain(
    winner: str,
    runner_up: str | None,
    winner_scores: Mapping[str, float | None],
    runner_up_scores: Mapping[str, float | None],
    *,
    head_to_head: float | None = None,
    confidence: float | None = None,
    even_within: float = EVEN_WITHIN,
    pointwise: tuple[float, float] | None = None,
) -> Reason:
    """Build the reason; ``runner_up`` None means there was nobody to beat (one candidate).

    ``pointwise`` (the winner's and the runner-up's reward) says that no pair was compared, so the
    pick rests on those rewards, not on pairwise preferences::

        explain("a", "b", {"Output": 0.61}, {"Output": 0.60}, pointwise=(0.61, 0.60)).text
        # 'a over b: Output even (within 0.02); the pick rests on the pointwise rewards alone
        #  (0.610 vs 0.600): no pair was compared'
    """
    if runner_up is None:
        return Reason(winner, None, (), None, confidence, f"{winner} is the only distinct candidate; nothing was compared")
    names = list(winner_scores) + [n for n in runner_up_scores if n not in winner_scores]
    gaps = [CriterionGap(n, winner_scores.get(n), runner_up_scores.get(n)) for n in names]
    gaps.sort(key=lambda g: (g.gap is None, -(g.gap or 0.0)))
    ahead = [g for g in gaps if g.gap is not None and g.gap >= even_within]
    even = [g for g in gaps if g.gap is not None and abs(g.gap) < even_within]
    behind = [g for g in gaps if g.gap is not None and g.gap <= -even_within]
    parts = []
    if ahead:
        parts.append(", ".join(f"{g.criterion} {g.gap:+.2f} ({g.winner:.2f} vs {g.runner_up:.2f})" for g in ahead))
    if even:
        parts.append(", ".join(g.criterion for g in even) + f" even (within {even_within:.2f})")
    if behind:
        parts.append(f"{runner_up} led on " + ", ".join(f"{g.criterion} ({g.gap:+.2f})" for g in behind))
    if head_to_head is not None:
        parts.append(f"head-to-head P({winner} wins) = {head_to_head:.2f}")
    if pointwise is not None:
        if ahead:
            parts.append(f"pointwise rewards {pointwise[0]:.3f} vs {pointwise[1]:.3f}: no pair was compared")
        else:
            parts.append(f"the pick rests on the pointwise rewards alone ({pointwise[0]:.3f} vs {pointwise[1]:.3f}): "
                         "no pair was compared")
    elif not ahead:
        parts.append("no criterion separates them, so the pick rests on the pairwise preferences alone")
    if confidence is not None:
        parts.append(f"confidence {confidence:.2f} that {winner} is the best")
    text = f"{winner} over {runner_up}: " + "; ".join(parts)
    return Reason(winner, runner_up, tuple(gaps), head_to_head, confidence, text)
