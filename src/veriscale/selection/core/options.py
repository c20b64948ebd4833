"""The knobs the tournaments share, as one typed object instead of eight parameters apiece.

Callers keep passing keywords; the tournaments read them through :class:`TournamentOptions`::

    ppt(20, judge, k=4, seed=7, adaptive=True)           # the keywords are TournamentKnobs
    knobs: TournamentKnobs = {"seed": 7, "groups": ids}  # typed, for callers that build them
    options = TournamentOptions(**knobs)                 # what the tournament reads: options.seed
    options.stop_rule()                                  # the adaptive stop these knobs ask for

``BracketKnobs`` are the ones every schedule takes (knockout, the sparse ranking);
``TournamentKnobs`` add adaptive play (round robin and PPT).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypedDict

from veriscale.selection.core.adaptive import AdaptiveStop
from veriscale.selection.core.bradley_terry import DEFAULT_PRIOR

DEFAULT_TIE_TOLERANCE = 0.02


class BracketKnobs(TypedDict, total=False):
    """``groups`` (one id per candidate; equal ids are one output), ``seed``, ``tie_tolerance``
    (|P − 0.5| at most this is a tie) and ``prior`` (the Bradley–Terry prior's scale)."""

    groups: Sequence[Hashable] | None
    seed: int
    tie_tolerance: float
    prior: float


class TournamentKnobs(BracketKnobs, total=False):
    """Bracket knobs plus adaptive play: stop at ``min_confidence``, re-judge pairs within
    ``close_margin`` of a coin flip up to ``max_repeats`` judgements."""

    adaptive: bool
    min_confidence: float
    max_repeats: int
    close_margin: float


@dataclass(frozen=True)
class TournamentOptions:
    """Every knob with its default (see :class:`TournamentKnobs`)."""

    adaptive: bool = False
    min_confidence: float = 0.9
    max_repeats: int = 4
    close_margin: float = 0.2
    groups: Sequence[Hashable] | None = None
    seed: int = 0
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE
    prior: float = DEFAULT_PRIOR

    def stop_rule(self, repeats: int) -> AdaptiveStop:
        """The adaptive stop rule, checked against ``repeats`` when play is adaptive."""
        rule = AdaptiveStop(self.min_confidence, self.max_repeats, self.close_margin)
        if self.adaptive:
            rule.check(repeats)
        return rule
