"""The cost controller's judge over a rendered pool, priced from the verifier's own plan.

    judge = VerifierBudgetJudge(verifier, plan.pool)
    judge.cost(0, 3, 1, SCREEN)    # Cost(calls=2, tokens=1840): repeat 1 of (0, 3) on the first criterion
    await judge(0, 3, 1, FULL)     # PairVerdict on every criterion (the first one's calls are cache hits)

A judgement's price is ``verifier.plan_compare`` of that one repeat, less what the store already
holds (``executor.estimate``): calls per comparison follow the verifier's criteria, repeats and
layout (a joint verifier plans one call per slot order), and cache hits cost nothing (a call this
decision made before is one, also under ``refresh``).
"""

from __future__ import annotations

import copy
from typing import Any

from veriscale.selection.budget.ledger import FULL, Cost
from veriscale.selection.judge import VerifierJudge
from veriscale.selection.core.judging import PairVerdict
from veriscale.selection.core.adaptive import ADAPTIVE_MAX_REPEATS_SAMPLED
from veriscale.selection.rendering import RenderedPool
from veriscale.selection.verifier_seam import BudgetVerifier


class VerifierBudgetJudge:
    """A ``CostedJudge``: level 0 judges the first criterion alone, level 1 every criterion."""

    def __init__(self, verifier: BudgetVerifier, pool: RenderedPool, progress: Any = None) -> None:
        items = verifier.criteria.items
        self.pool = pool
        self._made: set[str] = set()  # store keys of the calls this decision has made
        self.full = VerifierJudge(verifier, pool, progress)
        self.judges = [self.full]
        self.verifiers = [verifier]  # per level, the verifier that judges (and prices) it
        if len(items) > 1:
            screen = copy.copy(verifier)  # the same executor: one store, one usage, one --max-calls
            screen.criteria = verifier.criteria.only([items[0].name])
            self.judges = [VerifierJudge(screen, pool, progress), self.full]
            self.verifiers = [screen, verifier]
        self.n_levels = len(self.judges)
        self.level_names = (f"the first criterion ({items[0].name})", f"all {len(items)} criteria")
        self.max_repeats = ADAPTIVE_MAX_REPEATS_SAMPLED if verifier.reasoning else 2

    def _at(self, level: int) -> int:
        return min(level, FULL) if self.n_levels > 1 else 0

    def _judge(self, level: int) -> VerifierJudge:
        return self.judges[self._at(level)]

    def cost(self, i: int, j: int, repeat: int, level: int) -> Cost:
        verifier, pool = self.verifiers[self._at(level)], self.pool
        calls, _ = verifier.plan_compare(pool.task_text, pool.texts[i], pool.texts[j], only_repeat=repeat)
        # a call this decision already made is answered from the store, under --refresh too
        calls = [c for c in verifier.executor.gateway.keyed(calls) if c.key not in self._made]
        estimate = verifier.executor.estimate(calls)
        return Cost(estimate.calls, estimate.prompt_tokens)

    async def __call__(self, i: int, j: int, repeat: int, level: int) -> PairVerdict:
        """The judgement, awaiting the verifier on the caller's loop (for ``BudgetController.arun``)."""
        verdict = await self._judge(level).acompare(i, j, repeat)
        self._made.update(verdict.calls)
        return verdict

    @property
    def verdicts(self) -> int:
        return sum(j.verdicts for j in self.judges)

    @property
    def low_label_mass(self) -> int:
        return sum(j.low_label_mass for j in self.judges)
