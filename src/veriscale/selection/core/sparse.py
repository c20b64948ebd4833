"""Rank a whole group with at most 3n comparisons: a ring, then the pairs whose order is unsettled.

Round robin ranks n candidates with every pair, n(n−1)/2 comparisons (28 for a GRPO group of
8). ``sparse_ranking`` spends at most ``3n`` (and never more than round robin)::

    result = sparse_ranking(8, judge, seed=3)      # judge(i, j, repeat) -> P(i ≻ j)
    result.ranking, result.strengths               # Bradley–Terry over what was judged
    result.n_comparisons                           # <= 24 for 8; each judged in both slot orders

1. **Ring**: each candidate of a seeded random cycle meets its successor (n comparisons), so
   the comparison graph is connected from the start.
2. **Pivots** (``pivots``, 0 by default): the strongest after the ring (Bradley–Terry) meet
   everyone they have not met. That settles the top, but a reward needs the whole order: on the
   simulated oracle (``benchmarks/bench_group_cost.py``) a pivot spends comparisons on pairs
   already far apart and costs Kendall τ, so the default skips it.
3. **Unsettled pairs**: while comparisons remain, refit and judge the unmet pair whose order is
   least certain under the fit's Laplace posterior, ``Φ(−|θ_a − θ_b| / sd(θ_a − θ_b))``; stop
   once every unmet pair's order is wrong with probability below ``1 − settled``.

A comparison is judged ``repeats`` times (default 2: both slot orders, as round robin does).
Bradley–Terry over a sparse graph stays finite (its L2 prior). ``groups`` (one id per
candidate, equal = identical output) judges identical candidates once. Same seed, same judge
answers → same comparisons and result. The stop reason is "settled", "budget spent" or
"single candidate".

``await asparse_ranking(8, ajudge, seed=3)`` takes an async judge: the ring is one concurrent
round, each pivot's meetings another; the unsettled pairs go one at a time (each choice reads
the fit before it). Judgements are recorded in the schedule's order, so the result is the sync
form's. ``sparse_ranking`` runs the same code with its judge called inline (``judging.run_inline``).
"""

from __future__ import annotations

from typing import Iterable, Unpack

import numpy as np
from scipy.special import ndtr

from veriscale.errors import UserError
from veriscale.selection.core.aggregate import TournamentResult, bradley_terry_result
from veriscale.selection.core.bradley_terry import BradleyTerryFit, fit_bradley_terry
from veriscale.selection.core.groups import group_candidates
from veriscale.selection.core.options import BracketKnobs, TournamentOptions
from veriscale.selection.core.judging import AsyncJudge, Judge, JudgeLedger, SyncJudge, run_inline
from veriscale.selection.core.schedules import ring_pairs, shuffled

COMPARISONS_PER_MEMBER = 3
DEFAULT_SETTLED = 0.99
_QUICK_SAMPLES = 16  # posterior draws of the intermediate fits (only the final fit's confidence is reported)


def comparison_budget(n: int, max_comparisons: int | None = None) -> int:
    """Comparisons the scheme may spend on ``n`` distinct candidates: min(3n, n(n−1)/2), or less if asked."""
    cap = min(COMPARISONS_PER_MEMBER * n, n * (n - 1) // 2)
    return cap if max_comparisons is None else min(cap, max_comparisons)


def order_uncertainty(fit: BradleyTerryFit, a: int, b: int) -> float:
    """Posterior probability that the fit orders ``a`` and ``b`` the wrong way round (0.5: no idea)."""
    cov = fit.covariance
    spread = float(np.sqrt(max(cov[a, a] + cov[b, b] - 2.0 * cov[a, b], 1e-12)))
    return float(ndtr(-abs(fit.strengths[a] - fit.strengths[b]) / spread))


def sparse_ranking(n_candidates: int, judge: Judge, *, repeats: int = 2, pivots: int = 0,
                   max_comparisons: int | None = None, settled: float = DEFAULT_SETTLED,
                   **knobs: Unpack[BracketKnobs]) -> TournamentResult:
    """Rank every candidate with at most :func:`comparison_budget` comparisons (see the module docstring)."""
    return run_inline(asparse_ranking(n_candidates, SyncJudge(judge), repeats=repeats, pivots=pivots,
                                      max_comparisons=max_comparisons, settled=settled, **knobs))


async def asparse_ranking(n_candidates: int, judge: AsyncJudge, *, repeats: int = 2, pivots: int = 0,
                          max_comparisons: int | None = None, settled: float = DEFAULT_SETTLED,
                          **knobs: Unpack[BracketKnobs]) -> TournamentResult:
    """:func:`sparse_ranking` with an async judge (rounds concurrent; see the module docstring)."""
    o = TournamentOptions(**knobs)
    groups, seed, tie_tolerance, prior = o.groups, o.seed, o.tie_tolerance, o.prior
    if not isinstance(n_candidates, (int, np.integer)) or isinstance(n_candidates, bool) or n_candidates < 1:
        raise UserError(f"n_candidates={n_candidates!r}: ranking needs at least one candidate, so pass N >= 1")
    if not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise UserError(f"repeats={repeats!r} must be a whole number >= 1 (2 judges each pair in both slot orders)")
    if not isinstance(pivots, (int, np.integer)) or pivots < 0:
        raise UserError(f"pivots={pivots!r} must be a whole number >= 0 (e.g. 1)")
    if max_comparisons is not None and (not isinstance(max_comparisons, (int, np.integer)) or max_comparisons < 1):
        raise UserError(f"max_comparisons={max_comparisons!r} must be a whole number >= 1, or None for 3n")
    if not 0.5 < settled <= 1.0:
        raise UserError(f"settled={settled!r} must be in (0.5, 1]: e.g. {DEFAULT_SETTLED}")
    grouped = group_candidates(n_candidates, groups)
    n = len(grouped.representatives)
    ledger = JudgeLedger.for_judge(judge, list(grouped.representatives))
    budget = comparison_budget(n, max_comparisons)
    met: set[frozenset[int]] = set()

    def fit(samples: int = _QUICK_SAMPLES) -> BradleyTerryFit:
        return fit_bradley_terry(n, ledger.outcomes(), prior=prior, n_samples=samples, seed=seed)

    async def meet(meetings: Iterable[tuple[int, int]]) -> None:
        """Judge, as one round, each meeting that is new and still fits the budget (in this order)."""
        fresh = []
        for a, b in meetings:
            if a == b or frozenset((a, b)) in met or len(met) >= budget:
                continue
            met.add(frozenset((a, b)))
            fresh.append((a, b))
        await ledger.aplay(fresh, repeats)

    stop = "single candidate" if n == 1 else "budget spent"
    if n > 1:
        cycle = shuffled(n, np.random.default_rng(seed))
        await meet(ring_pairs(cycle))
        for pivot in fit().ranking[:pivots] if pivots else ():
            await meet(((pivot, other) if position % 2 else (other, pivot)) for position, other in enumerate(cycle))
        while len(met) < budget:
            current = fit()
            unmet = [(a, b) for a in range(n) for b in range(a + 1, n) if frozenset((a, b)) not in met]
            doubt, a, b = max((order_uncertainty(current, a, b), -a, -b) for a, b in unmet)
            if doubt < 1.0 - settled:
                stop = "settled"
                break
            await meet([(-a, -b)])
    return bradley_terry_result(
        "sparse", grouped, ledger, fit(samples=4000), n_comparisons=len(met), planned=budget * repeats,
        adaptive=True, stop=stop, tie_tolerance=tie_tolerance,
    )
