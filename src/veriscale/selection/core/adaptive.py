"""Adaptive play: judge round by round, stop once the leader is confidently best.

    stop = AdaptiveStop(min_confidence=0.9, max_repeats=4)
    fit, reason, rounds_played = play_adaptively(rounds, ledger, stop, refit)

Each round's pairs are judged once, then Bradley–Terry is refit (``refit()``); play stops as
soon as the confidence that the leader is best reaches ``min_confidence``. If the rounds run
out first, the leader's comparisons whose mean preference is within ``close_margin`` of 0.5
are judged again, closest first, until confident or each such pair has ``max_repeats``
judgements. The reason it stopped is "confident" or "max repeats".

The async forms play the same rounds with ``await ledger.aplay(...)`` (a concurrent ledger judges
a round's pairs at once); the stopping decisions read the ledger only between rounds, so they
are the same as played one call at a time::

    fit, reason, rounds_played = await aplay_adaptively(rounds, ledger, stop, refit)
    await aplay_all(rounds, ledger, repeats)

``play_all`` and ``play_adaptively`` are their synchronous forms (a ledger of a sync judge).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from veriscale.errors import UserError
from veriscale.selection.core.bradley_terry import BradleyTerryFit
from veriscale.selection.core.judging import JudgeLedger, run_inline
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
    run_inline(aplay_all(rounds, ledger, repeats))


async def aplay_all(rounds: Sequence[Sequence[Pair]], ledger: JudgeLedger, repeats: int) -> None:
    """:func:`play_all`, one ``ledger.aplay`` per round."""
    for pairs in rounds:
        await ledger.aplay(pairs, repeats)


def play_adaptively(
    rounds: Sequence[Sequence[Pair]], ledger: JudgeLedger, stop: AdaptiveStop, refit: Refit
) -> tuple[BradleyTerryFit, str, int]:
    """Judge ``rounds`` one at a time until confident, then re-judge close pairs; returns the fit, why it stopped, rounds played."""
    return run_inline(aplay_adaptively(rounds, ledger, stop, refit))


async def aplay_adaptively(
    rounds: Sequence[Sequence[Pair]], ledger: JudgeLedger, stop: AdaptiveStop, refit: Refit
) -> tuple[BradleyTerryFit, str, int]:
    """:func:`play_adaptively`, one ``ledger.aplay`` per round."""
    for played, pairs in enumerate(rounds, start=1):
        await ledger.aplay(pairs)
        fit = refit()
        if fit.confidence >= stop.min_confidence:
            return fit, "confident", played
    fit, reason = await aextra_repeats(ledger, stop, refit)
    return fit, reason, len(rounds)


def extra_repeats(ledger: JudgeLedger, stop: AdaptiveStop, refit: Refit) -> tuple[BradleyTerryFit, str]:
    """Re-judge the leader's close comparisons, closest first, until confident or out of repeats."""
    return run_inline(aextra_repeats(ledger, stop, refit))


async def aextra_repeats(ledger: JudgeLedger, stop: AdaptiveStop, refit: Refit) -> tuple[BradleyTerryFit, str]:
    """:func:`extra_repeats`; one judgement at a time (each choice reads the fit before it)."""
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
            preference = ledger.mean_preference(leader, other)
            assert preference is not None  # a judged pair has a mean preference
            gap = abs(preference - 0.5)
            if gap < stop.close_margin:
                close.append((gap, other))
        if not close:
            return fit, "max repeats"
        await ledger.ajudge_pair(leader, min(close)[1])
