"""The judge contract and the ledger that calls it, so no judgement is ever asked twice.

A judge is any callable ``judge(i, j, repeat)`` returning ``P(candidate i ≻ candidate j)``, as a
float or as a ``PairVerdict`` that also carries each criterion's rewards. The caller shows
candidate ``i`` in slot A when ``repeat`` is even and candidate ``j`` in slot A when it is odd
(``veriscale.verify.repeats``); the tournament code only chooses ``(i, j, repeat)``. The ledger
keeps one orientation per unordered pair (the one used the first time) and hands out repeat
indices 0, 1, 2, … for that pair in turn, so every ``(i, j, repeat)`` is asked at most once (a
cache keyed on it is safe) and repeated judgements of a pair alternate slots::

    ledger = JudgeLedger(judge)
    ledger.judge_pair(2, 5)   # judge(2, 5, 0): 2 in slot A
    ledger.judge_pair(5, 2)   # judge(2, 5, 1): same pair, 5 in slot A
    ledger.mean_preference(5, 2)   # mean P(5 ≻ 2) over both
    ledger.judgements[0].rewards   # {"Output": (reward of 2, reward of 5), ...} or None
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, NamedTuple

from veriscale.errors import UserError

PairRewards = Mapping[str, tuple[float | None, float | None]]
"""Per criterion, ``(reward of i, reward of j)``; None where a criterion went unscored."""


class PairVerdict(NamedTuple):
    """What a judge returns when it has more to say than P: the preference and the rewards behind it."""

    p: float
    rewards: PairRewards
    calls: tuple[str, ...] = ()  # the store keys of the model calls behind it


class ScoreVerdict(NamedTuple):
    """What a pointwise score function returns when it has more to say: the reward per criterion."""

    reward: float
    rewards: Mapping[str, float | None]


Judge = Callable[[int, int, int], float | PairVerdict]
"""``judge(i, j, repeat) -> P(i ≻ j)`` (or a ``PairVerdict``); ``i`` is in slot A when ``repeat`` is even."""


class Judgement(NamedTuple):
    """One judge call: ``judge(i, j, repeat)`` returned ``p = P(i ≻ j)`` (and, if it said, the rewards)."""

    i: int
    j: int
    repeat: int
    p: float
    rewards: PairRewards | None = None
    calls: tuple[str, ...] = ()  # store keys of the model calls behind it, when the judge said

    def to_dict(self) -> dict[str, Any]:
        """``{"i", "j", "repeat", "p"}``, plus ``"rewards"`` and ``"calls"`` when the judge gave them."""
        data: dict[str, Any] = {"i": self.i, "j": self.j, "repeat": self.repeat, "p": self.p}
        if self.rewards is not None:
            data["rewards"] = {name: list(pair) for name, pair in self.rewards.items()}
        if self.calls:
            data["calls"] = list(self.calls)
        return data


class Scored(NamedTuple):
    """One pointwise score: candidate ``i`` got ``reward`` (and, if the score function said, per criterion)."""

    i: int
    reward: float
    rewards: Mapping[str, float | None] | None = None


class PairBook:
    """What a ledger knows of the pairs it judged: the orientation each was first judged in, the
    ``P(first ≻ second)`` values per pair and every judgement (shared by :class:`JudgeLedger`
    and the cost controller's ledger)."""

    _orientation: dict[frozenset[int], tuple[int, int]]
    _values: dict[frozenset[int], list[float]]
    judgements: list[Judgement]

    def mean_preference(self, a: int, b: int) -> float | None:
        """Mean ``P(a ≻ b)`` over the pair's judgements so far, or None if never judged."""
        key = frozenset((a, b))
        values = self._values.get(key)
        if not values:
            return None
        mean = sum(values) / len(values)
        return mean if self._orientation[key][0] == a else 1.0 - mean

    def judged_pairs(self) -> list[tuple[int, int]]:
        """Unordered pairs judged so far, each once, in the orientation first used."""
        return list(self._orientation.values())

    def outcomes(self) -> list[tuple[int, int, float]]:
        """Every judgement as a Bradley–Terry outcome ``(i, j, p)`` in local indices."""
        return [(j.i, j.j, j.p) for j in self.judgements]


class JudgeLedger(PairBook):
    """Calls the judge, records every judgement, and tracks repeats per unordered pair."""

    def __init__(self, judge: Judge, index_map: list[int] | None = None) -> None:
        """``index_map`` translates local indices to the judge's candidate indices (identity if None)."""
        if not callable(judge):
            raise UserError(f"judge {judge!r} is not callable: pass a function judge(i, j, repeat) -> P(i beats j)")
        self._judge = judge
        self._index_map = index_map
        self._orientation: dict[frozenset[int], tuple[int, int]] = {}
        self._values: dict[frozenset[int], list[float]] = {}
        self.judgements: list[Judgement] = []

    def repeats_done(self, a: int, b: int) -> int:
        """How many times the pair {a, b} has been judged."""
        return len(self._values.get(frozenset((a, b)), ()))

    def judge_pair(self, a: int, b: int) -> float:
        """Judge the pair once more and return ``P(a ≻ b)``.

        The first judgement of a pair uses ``(a, b)`` as its orientation, so ``a`` takes slot A;
        later ones reuse that orientation with the next repeat index.
        """
        key = frozenset((a, b))
        first, second = self._orientation.setdefault(key, (a, b))
        values = self._values.setdefault(key, [])
        repeat = len(values)
        p, rewards, calls = self._call(first, second, repeat)
        values.append(p)
        self.judgements.append(Judgement(first, second, repeat, p, rewards, calls))
        return p if first == a else 1.0 - p

    def slot_a_next(self, a: int, b: int) -> int | None:
        """Who sits in slot A when the pair {a, b} is judged next; None if it was never judged."""
        key = frozenset((a, b))
        if key not in self._orientation:
            return None
        first, second = self._orientation[key]
        return first if len(self._values[key]) % 2 == 0 else second

    def _call(self, a: int, b: int, repeat: int) -> tuple[float, PairRewards | None, tuple[str, ...]]:
        ga, gb = (a, b) if self._index_map is None else (self._index_map[a], self._index_map[b])
        answer = self._judge(ga, gb, repeat)
        value, rewards, calls = (answer.p, answer.rewards, answer.calls) if isinstance(answer, PairVerdict) else (answer, None, ())
        try:
            p = float(value)
        except (TypeError, ValueError):
            p = math.nan
        if not 0.0 <= p <= 1.0:
            raise UserError(
                f"judge({ga}, {gb}, {repeat}) returned {value!r}: a judge must return P(i beats j) in [0, 1]"
            )
        return p, rewards, tuple(calls)
