"""Adaptive play: judge round by round, stop once the leader is confidently best.

    stop = AdaptiveStop(min_confidence=0.9, max_repeats=4)
    fit, reason, rounds_played = play_adaptively(rounds, ledger, stop, refit)

Each round's pairs are judged once, then Bradley–Terry is refit (``refit()``); play stops as
soon as the confidence that the leader is best reaches ``min_confidence``. If the rounds run
out first, the leader's comparisons whose mean preference is within ``close_margin`` of 0.5
are judged again, closest first, until confident or each such pair has ``max_repeats``
judgements. The reason it stopped is "confident" or "max repeats".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from veriscale.errors import UserError
from veriscale.selection.core.bradley_terry import BradleyTerryFit
from veriscale.selection.core.judging import JudgeLedger
from veriscale.selection.core.schedules import Pair

Refit = Callable[[], BradleyTerryFit]
"""Fit Bradley–Terry to the ledger's judgements so far."""


@dataclass(frozen=True)
class AdaptiveStop:
    """When adaptive play stops, and how far the leader's close pairs may be re-judged."""

    min_confidence: float = 0.9
    max_repeats: int = 4
    close_margin: float = 0.2

    def check(self, repeats: int) -> None:
        """Raise a UserError for a setting out of range (``repeats``: the planned judgements per pair)."""
        if not 0.0 < self.min_confidence <= 1.0:
            raise UserError(f"min_confidence={self.min_confidence!r} must be in (0, 1]: e.g. 0.9")
        if not isinstance(self.max_repeats, (int, np.integer)) or self.max_repeats < repeats:
            raise UserError(f"max_repeats={self.max_repeats!r} must be a whole number >= repeats ({repeats})")
        if not 0.0 <= self.close_margin <= 0.5:
            raise UserError(
                f"close_margin={self.close_margin!r} must be in [0, 0.5]: e.g. 0.2 re-judges P within 0.3..0.7"
            )

#: Most repeats adaptive mode gives a pair when judgements are sampled (reasoning): each is new evidence.
ADAPTIVE_MAX_REPEATS_SAMPLED = 4



def play_all(rounds: Sequence[Sequence[Pair]], ledger: JudgeLedger, repeats: int) -> None:
    """Judge every pair of every round ``repeats`` times (the schedule without stopping early)."""
    for pairs in rounds:
        for a, b in pairs:
            for _ in range(repeats):
                ledger.judge_pair(a, b)


def play_adaptively(
    rounds: Sequence[Sequence[Pair]], ledger: JudgeLedger, stop: AdaptiveStop, refit: Refit
) -> tuple[BradleyTerryFit, str, int]:
    """Judge ``rounds`` one at a time until confident, then re-judge close pairs; returns the fit, why it stopped, rounds played."""
    for played, pairs in enumerate(rounds, start=1):
        for a, b in pairs:
            ledger.judge_pair(a, b)
        fit = refit()
        if fit.confidence >= stop.min_confidence:
            return fit, "confident", played
    fit, reason = extra_repeats(ledger, stop, refit)
    return fit, reason, len(rounds)


def extra_repeats(ledger: JudgeLedger, stop: AdaptiveStop, refit: Refit) -> tuple[BradleyTerryFit, str]:
    """Re-judge the leader's close comparisons, closest first, until confident or out of repeats."""
    while True:
        fit = refit()
        if fit.confidence >= stop.min_confidence:
            return fit, "confident"
        leader = fit.leader
        close = []
        for a, b in ledger.judged_pairs():
            if leader not in (a, b) or ledger.repeats_done(a, b) >= stop.max_repeats:
                continue
            other = b if a == leader else a
            gap = abs(ledger.mean_preference(leader, other) - 0.5)
            if gap < stop.close_margin:
                close.append((gap, other))
        if not close:
            return fit, "max repeats"
        ledger.judge_pair(leader, min(close)[1])
