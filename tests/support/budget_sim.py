"""A simulated judge on C criteria with a priced plan, and the fixed schedule a budget buys.

    judge = SimulatedCriteriaJudge(criteria_qualities(8, 3, seed=1), seed=1)
    outcome = BudgetController("calls=60", n_criteria=3).run(8, judge)
    outcome.result.winner == judge.best, judge.calls          # calls actually made

    k, c = fixed_schedule(8, 60, judge.comparison_calls)     # PPT k pivots on the first c criteria
    fixed = ppt(8, judge.on_criteria(c), k=k)                # the equal-cost fixed baseline

Criterion ``c`` is a ``NoisyPreferenceOracle`` over column ``c`` of ``qualities``; a judgement
on several criteria is the mean of their preferences, and the truly best candidate is the one
with the highest mean quality. Like the verifier, one slot order of a pair costs 2 calls per
criterion (both slots), or 1 call per slot order with ``joint=True``; a computation already
made is a cache hit and costs nothing.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from veriscale.selection.budget.ledger import FULL, SCREEN, Cost
from veriscale.selection.core.schedules import ppt_comparison_count
from tests.support.selection_sim import NoisyPreferenceOracle
from veriscale.verify.repeats import repeat as repeat_computation


def criteria_qualities(n: int, n_criteria: int, seed: int, spread: float = 1.0, criterion_spread: float = 0.5
                       ) -> np.ndarray:
    """``n × n_criteria`` qualities: a shared N(0, spread²) part plus N(0, criterion_spread²) per criterion."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0.0, spread, size=(n, 1))
    return base + rng.normal(0.0, criterion_spread, size=(n, n_criteria))


class SimulatedCriteriaJudge:
    """A ``CostedJudge`` (``veriscale.selection.budget.controller``) over simulated criteria; ``calls`` counts new calls."""

    max_repeats = 2

    def __init__(self, qualities: np.ndarray, *, temperature: float = 0.5, noise: float = 0.1,
                 slot_bias: float = 0.0, seed: int = 0, joint: bool = False, tokens_per_call: int = 500) -> None:
        self.qualities = np.asarray(qualities, dtype=float)
        self.n_criteria = self.qualities.shape[1]
        self.oracles = [NoisyPreferenceOracle(self.qualities[:, c], temperature=temperature, noise=noise,
                                              slot_bias=slot_bias, seed=seed * 1000 + c) for c in range(self.n_criteria)]
        self.joint, self.tokens_per_call = joint, tokens_per_call
        self.n_levels = 2 if self.n_criteria > 1 else 1
        self.level_names = ("the first criterion", f"all {self.n_criteria} criteria")
        self.calls = 0
        self._seen: set[tuple] = set()

    @property
    def best(self) -> int:
        """The truly best candidate: the highest mean quality over the criteria."""
        return int(np.argmax(self.qualities.mean(axis=1)))

    def comparison_calls(self, n_criteria: int) -> int:
        """Calls of one new slot order of a pair on the first ``n_criteria`` criteria."""
        return 1 if self.joint else 2 * n_criteria

    def _keys(self, i: int, j: int, repeat: int, n_criteria: int) -> list[tuple]:
        order = repeat_computation(repeat, pairwise=True, reasoning=False).order
        slots = (i, j) if order == "AB" else (j, i)
        if self.joint:
            return [(*slots, "joint", n_criteria)]
        return [(*slots, c) for c in range(n_criteria)]

    def _criteria(self, level: int) -> int:
        return 1 if level == SCREEN else self.n_criteria

    def price(self, i: int, j: int, repeat: int, n_criteria: int) -> Cost:
        new = [k for k in self._keys(i, j, repeat, n_criteria) if k not in self._seen]
        calls = len(new) * (1 if self.joint else 2)
        return Cost(calls, calls * self.tokens_per_call)

    def judge(self, i: int, j: int, repeat: int, n_criteria: int) -> float:
        """``P(i ≻ j)`` on the first ``n_criteria`` criteria; new computations are counted as calls."""
        self.calls += self.price(i, j, repeat, n_criteria).calls
        self._seen.update(self._keys(i, j, repeat, n_criteria))
        return float(np.mean([self.oracles[c](i, j, repeat) for c in range(n_criteria)]))

    def cost(self, i: int, j: int, repeat: int, level: int) -> Cost:
        return self.price(i, j, repeat, self._criteria(level))

    def __call__(self, i: int, j: int, repeat: int, level: int = FULL) -> float:
        return self.judge(i, j, repeat, self._criteria(level))

    def on_criteria(self, n_criteria: int) -> Callable[[int, int, int], float]:
        """A plain tournament judge ``judge(i, j, repeat)`` on the first ``n_criteria`` criteria."""
        return lambda i, j, repeat: self.judge(i, j, repeat, n_criteria)


def fixed_schedule(n: int, budget_calls: int, comparison_calls: Callable[[int], int], *, k_max: int = 2,
                   n_criteria: int = 3) -> tuple[int, int] | None:
    """The PPT ``(k, c)`` (pivots, first criteria) costing the most calls within ``budget_calls``.

    Ties go to more criteria. None when not even k = 1 on one criterion fits.
    """
    best: tuple[int, int, int] | None = None
    for k in range(1, min(k_max, n) + 1):
        for c in range(1, n_criteria + 1):
            cost = ppt_comparison_count(n, k) * comparison_calls(c)
            if cost <= budget_calls and (best is None or (cost, c) > (best[0], best[2])):
                best = (cost, k, c)
    return None if best is None else (best[1], best[2])
