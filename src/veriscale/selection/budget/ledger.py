"""What the cost controller keeps account of: what a judgement costs (:class:`Cost`, priced by a
:class:`CostedJudge`), what was judged per pair and criteria level (:class:`Ledger`) and what is
left to spend (:class:`Purse`)::

    ledger = Ledger(judge, reps=[0, 3, 5], weights=[0.5, 1.0])
    ledger.cost(0, 1, SCREEN)            # Cost(calls=2, tokens=1800): judging local 0 and 1 once more
    await ledger.ajudge_pair(0, 1, SCREEN)
    purse = Purse("calls", 60)
    purse.affordable(ledger, [(0, 1, FULL)])   # the actions whose next judgement fits what is left

:mod:`veriscale.selection.budget.controller` plays the steps on these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Protocol, Sequence

from veriscale.selection.core.judging import Judgement, PairBook, PairVerdict, SyncJudge, answer_of, check_answer, run_inline

SCREEN, FULL = 0, 1  # criteria levels: the first criterion alone, every criterion


@dataclass(frozen=True)
class Cost:
    """What one judgement would spend: new model calls and their prompt tokens (cached calls: 0)."""

    calls: int
    tokens: int

    def of(self, kind: str) -> int:
        return self.calls if kind == "calls" else self.tokens


class CostedJudge(Protocol):
    """A judge that can price a judgement before making it.

    ``n_levels``: 1 when there is one criterion, else 2 (SCREEN, FULL). ``max_repeats``:
    judgements per pair and level that can each bring something new (2 slot orders without
    sampled reasoning). ``level_names[level]``: what the level judges, for the step log.
    For :meth:`BudgetController.arun`, ``__call__`` is async (``cost`` stays synchronous).
    """

    @property
    def n_levels(self) -> int: ...

    @property
    def max_repeats(self) -> int: ...

    @property
    def level_names(self) -> Sequence[str]: ...

    def cost(self, i: int, j: int, repeat: int, level: int) -> Cost: ...

    def __call__(self, i: int, j: int, repeat: int, level: int
                 ) -> float | PairVerdict | Awaitable[float | PairVerdict]: ...


class Ledger(PairBook):
    """Judgements per (pair, level), with the orientation a pair was first judged in."""

    def __init__(self, judge: CostedJudge, reps: Sequence[int], weights: Sequence[float], *,
                 inline: bool = True) -> None:
        self.judge, self.reps, self.level_weight = judge, list(reps), list(weights)
        self._call: Any = SyncJudge(judge) if inline else judge  # inline: a sync judge, called in turn
        self.names = [str(r) for r in reps]  # what the step log calls each local candidate
        self._orientation: dict[frozenset[int], tuple[int, int]] = {}
        self._values: dict[frozenset[int], list[float]] = {}
        self._done: dict[tuple[frozenset[int], int], int] = {}
        self.judgements: list[Judgement] = []
        self.weights: list[float] = []

    def repeats_done(self, a: int, b: int, level: int) -> int:
        return self._done.get((frozenset((a, b)), level), 0)

    def next_call(self, a: int, b: int, level: int) -> tuple[int, int, int]:
        """The judge's (i, j, repeat) for judging {a, b} once more at ``level``."""
        first, second = self._orientation.get(frozenset((a, b)), (a, b))
        return self.reps[first], self.reps[second], self.repeats_done(a, b, level)

    def cost(self, a: int, b: int, level: int) -> Cost:
        return self.judge.cost(*self.next_call(a, b, level), level)

    def judge_pair(self, a: int, b: int, level: int) -> None:
        run_inline(self.ajudge_pair(a, b, level))

    async def ajudge_pair(self, a: int, b: int, level: int) -> None:
        key = frozenset((a, b))
        first, second = self._orientation.setdefault(key, (a, b))
        repeat = self.repeats_done(a, b, level)
        answer = await answer_of(self._call, self.reps[first], self.reps[second], repeat, level)
        p, rewards, calls = check_answer(answer, f"judge({first}, {second}, {repeat})")
        self._done[(key, level)] = repeat + 1
        self._values.setdefault(key, []).append(p)
        self.judgements.append(Judgement(first, second, repeat, p, rewards, tuple(calls)))
        self.weights.append(self.level_weight[level])

    def met(self, a: int, b: int) -> bool:
        return frozenset((a, b)) in self._values


@dataclass
class Purse:
    kind: str
    amount: int
    spent: int = 0

    @property
    def left(self) -> int:
        return self.amount - self.spent

    def affordable(self, ledger: Ledger, actions: Sequence[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """The actions whose first judgement fits what is left (the step is played one by one)."""
        out = []
        for a, b, level in actions:
            if (a, b, level) in out:  # a repeated action: its next repeat is priced when played
                out.append((a, b, level))
                continue
            if ledger.cost(a, b, level).of(self.kind) <= self.left:
                out.append((a, b, level))
        return out
