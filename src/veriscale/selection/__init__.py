"""Best-of-N selection from pairwise judgements.

    from veriscale.selection import ppt
    result = ppt(n_candidates, judge, k=4, seed=0)   # judge(i, j, repeat) -> P(i beats j)
    result.winner, result.confidence, result.n_judgements
    result = await appt(n_candidates, ajudge, k=4, seed=0)   # async judge; each round's meetings concurrent

Three rooms:

- ``core`` — pure logic, no model calls: ``schedules`` (who meets whom: ring, pivots, round
  robin, knockout), ``tournament`` (running round robin, PPT, knockout, pointwise; sync and async forms), ``adaptive``
  (stop once confident, extra repeats), ``aggregate`` (Bradley–Terry into a
  ``TournamentResult``), ``bradley_terry`` (fit + confidence), ``judging`` (judge contract and
  ledger; judgements carry per-criterion rewards), ``groups`` (identical candidates), ``sparse``
  (groups judged on a sparse schedule), ``position_bias`` and ``suspects`` (policies over a
  finished ranking).
- ``budget`` — the cost controller: ``form`` (``calls=N`` / ``tokens=N``), ``steps`` (what each
  escalation step did), ``controller`` (granularity, ring, pivots, repeats, criteria inside the
  budget), ``scale`` (the finest readable scale the budget pays for), ``verifier_judge`` (the
  Verifier priced per judgement).
- the glue with the verifier: ``settings`` (``SelectionSettings``, shared by select, bench and
  the CLI), ``rendering`` and ``prompt_fit`` (each candidate rendered once, under a budget that
  fits the context), ``plan`` (``plan_selection``: schedule and cost before any call), ``judge``
  (the Verifier as a judge), ``reason`` (why the pick), ``select`` (``select`` /
  ``run_selection``: the pick and its reason).

The noisy preference oracles that tests and benchmarks simulate with live in ``tests/support``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from veriscale.selection.core.bradley_terry import BradleyTerryFit, fit_bradley_terry, normalised_win_mass
    from veriscale.selection.core.judging import AsyncJudge, Judge, Judgement, PairVerdict, ScoreVerdict
    from veriscale.selection.core.tournament import (AsyncScore, Score, TournamentResult, aknockout, apointwise,
                                                     appt, around_robin, knockout, pointwise, ppt,
                                                     ppt_comparison_count, round_robin)

__all__ = [
    "AsyncJudge",
    "AsyncScore",
    "BradleyTerryFit",
    "Judge",
    "Judgement",
    "PairVerdict",
    "ScoreVerdict",
    "Score",
    "TournamentResult",
    "aknockout",
    "apointwise",
    "appt",
    "around_robin",
    "fit_bradley_terry",
    "knockout",
    "normalised_win_mass",
    "pointwise",
    "ppt",
    "ppt_comparison_count",
    "round_robin",
]

_HOME = {**dict.fromkeys(("BradleyTerryFit", "fit_bradley_terry", "normalised_win_mass"), "bradley_terry"),
         **dict.fromkeys(("AsyncJudge", "Judge", "Judgement", "PairVerdict", "ScoreVerdict"), "judging")}


def __getattr__(name: str) -> Any:
    """A public name, imported on first use (so ``veriscale.selection.inputs`` loads no numpy)."""
    if name not in __all__:
        raise AttributeError(f"module 'veriscale.selection' has no attribute '{name}'")
    value = getattr(importlib.import_module(f"veriscale.selection.core.{_HOME.get(name, 'tournament')}"), name)
    globals()[name] = value
    return value
