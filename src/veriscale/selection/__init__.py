"""Best-of-N selection from pairwise judgements (pure logic, no model calls).

    from veriscale.selection import ppt
    result = ppt(n_candidates, judge, k=4, seed=0)   # judge(i, j, repeat) -> P(i beats j)
    result.winner, result.confidence, result.n_judgements

Modules: ``bradley_terry`` (fit + confidence), ``tournament`` (round robin, PPT, knockout,
pointwise, adaptive mode), ``judging`` (judge contract and ledger), ``groups`` (identical
candidates), ``simulate`` (a noisy preference oracle for tests and benchmarks).
"""

from veriscale.selection.bradley_terry import BradleyTerryFit, fit_bradley_terry, normalised_win_mass
from veriscale.selection.judging import Judge, Judgement
from veriscale.selection.tournament import (
    Score,
    TournamentResult,
    knockout,
    pointwise,
    ppt,
    ppt_comparison_count,
    round_robin,
)

__all__ = [
    "BradleyTerryFit",
    "Judge",
    "Judgement",
    "Score",
    "TournamentResult",
    "fit_bradley_terry",
    "knockout",
    "normalised_win_mass",
    "pointwise",
    "ppt",
    "ppt_comparison_count",
    "round_robin",
]
