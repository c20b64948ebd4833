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

An async judge (``async def judge(i, j, repeat)``, or any judge returning an awaitable) is
played a round at a time: ``await ledger.aplay(meetings, repeats)`` judges each meeting
``repeats`` times, the round's pairs concurrently (``asyncio.gather``) and each pair's repeats in
turn. Repeat indices are handed out, and judgements recorded, in the schedule's order whatever
order they finish in, so a round gives the same ledger played one call at a time::

    ledger = JudgeLedger(ajudge, concurrent=True)
    await ledger.aplay([(0, 1), (2, 3)], repeats=2)   # [[P(0≻1), …], [P(2≻3), …]]

The sync tournaments wrap their judge in :class:`SyncJudge` and drive the same async code with
:func:`run_inline`: no event loop, one call at a time in today's order (a sync judge may block,
e.g. on the gateway's own loop).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Coroutine
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence, TypeVar

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

AsyncJudge = Callable[[int, int, int], Awaitable[float | PairVerdict]]
"""``await judge(i, j, repeat) -> P(i ≻ j)`` (or a ``PairVerdict``): the judge of the async tournaments."""

T = TypeVar("T")


class _MarkedJudge:
    """A judge wrapped to tell the tournaments how to call it; ``__call__`` passes through, ``judge``
    is the wrapped callable (a wrapper of the same kind is unwrapped first)."""

    __slots__ = ("judge",)
    judge: Callable[..., Any]

    def __init__(self, judge: Callable[..., Any]) -> None:
        self.judge = judge.judge if isinstance(judge, type(self)) else judge

    def __call__(self, *args: Any) -> Any:
        return self.judge(*args)


class SyncJudge(_MarkedJudge):
    """Marks a synchronous judge: the async tournament code calls it inline, one call at a time.

    The sync tournaments (``ppt``, ``round_robin``, …) wrap their judge in it and run the async
    core with :func:`run_inline`.
    """

    __slots__ = ()


class InOrder(_MarkedJudge):
    """Marks an async judge to be awaited one call at a time, in the schedule's order, instead of a
    round's pairs at once: for a model that runs one call at a time and reuses the prompt prefix
    consecutive calls share (the embedded model's KV cache), where concurrency only scrambles the
    order and loses that reuse. ``InOrder(judge.acompare)``; the answers are the same either way."""

    __slots__ = ()


def run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end on this thread without an event loop (the sync tournaments' driver).

    It must never suspend: every judge it calls is a :class:`SyncJudge`, answered inline. Works
    from any thread, one with a running loop included, as the sync tournaments always have.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise RuntimeError("a synchronous tournament waited on an awaitable: pass an async judge to the async "
                       "form instead (appt, around_robin, aknockout, apointwise, asparse_ranking, arun)")


async def all_or_cancel(coros: Iterable[Awaitable[T]]) -> list[T]:
    """``asyncio.gather`` that, when one fails (or the caller is cancelled), cancels the others and
    waits for them before the error goes on: no judge call of a failed round is left running."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def check_answer(answer: Any, where: str) -> tuple[float, PairRewards | None, tuple[str, ...]]:
    """A judge's answer as ``(p, rewards, calls)``; a UserError for a P outside [0, 1] (``where``: the call)."""
    value, rewards, calls = ((answer.p, answer.rewards, answer.calls) if isinstance(answer, PairVerdict)
                             else (answer, None, ()))
    try:
        p = float(value)
    except (TypeError, ValueError):
        p = math.nan
    if not 0.0 <= p <= 1.0:
        raise UserError(f"{where} returned {value!r}: a judge must return P(i beats j) in [0, 1]")
    return p, rewards, tuple(calls)


async def answer_of(judge: Callable[..., Any], *args: Any) -> Any:
    """``judge(*args)``, awaited when it gives an awaitable; a :class:`SyncJudge` must not (see
    :func:`run_inline`), so one that does is refused, naming the async forms."""
    answer = judge(*args)
    if inspect.isawaitable(answer):
        if isinstance(judge, SyncJudge):
            if inspect.iscoroutine(answer):
                answer.close()
            raise UserError(f"judge {judge.judge!r} is async: await the async form of the tournament "
                            "(appt, around_robin, aknockout, apointwise, asparse_ranking) instead")
        answer = await answer
    return answer


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


class _Slot(NamedTuple):
    """One judgement reserved in a round: pair ``key`` judged as ``(first, second, repeat)``;
    ``flip`` when the meeting asked for ``P(second ≻ first)``."""

    key: frozenset[int]
    first: int
    second: int
    repeat: int
    flip: bool


class JudgeLedger(PairBook):
    """Calls the judge, records every judgement, and tracks repeats per unordered pair.

    ``concurrent``: :meth:`aplay` judges a round's pairs concurrently (an async judge on a running
    loop); False plays them one call at a time, in the schedule's order.
    """

    def __init__(self, judge: Judge | AsyncJudge, index_map: list[int] | None = None, *,
                 concurrent: bool = False) -> None:
        """``index_map`` translates local indices to the judge's candidate indices (identity if None)."""
        if not callable(judge.judge if isinstance(judge, SyncJudge) else judge):
            shown = judge.judge if isinstance(judge, SyncJudge) else judge
            raise UserError(f"judge {shown!r} is not callable: pass a function judge(i, j, repeat) -> P(i beats j)")
        self._judge = judge
        self._index_map = index_map
        self.concurrent = concurrent and not isinstance(judge, SyncJudge)
        self._orientation: dict[frozenset[int], tuple[int, int]] = {}
        self._values: dict[frozenset[int], list[float]] = {}
        self.judgements: list[Judgement] = []

    @classmethod
    def for_judge(cls, judge: Judge | AsyncJudge, index_map: list[int] | None = None) -> "JudgeLedger":
        """The async tournaments' ledger: concurrent rounds unless ``judge`` is a :class:`SyncJudge`
        or :class:`InOrder`."""
        return cls(judge, index_map, concurrent=not isinstance(judge, InOrder))

    def repeats_done(self, a: int, b: int) -> int:
        """How many times the pair {a, b} has been judged."""
        return len(self._values.get(frozenset((a, b)), ()))

    def judge_pair(self, a: int, b: int) -> float:
        """Judge the pair once more and return ``P(a ≻ b)`` (a synchronous judge).

        The first judgement of a pair uses ``(a, b)`` as its orientation, so ``a`` takes slot A;
        later ones reuse that orientation with the next repeat index.
        """
        return run_inline(self._play([(a, b)], 1, concurrent=False))[0][0]

    async def ajudge_pair(self, a: int, b: int) -> float:
        """:meth:`judge_pair`, awaiting the judge."""
        return (await self.aplay([(a, b)]))[0][0]

    async def aplay(self, meetings: Sequence[tuple[int, int]], repeats: int = 1) -> list[list[float]]:
        """Judge each meeting ``(a, b)`` ``repeats`` times; per meeting, ``P(a ≻ b)`` of each judgement.

        One round: with ``concurrent`` its pairs are judged at once, each pair's judgements in turn
        (repeat 0, 1, …). Repeat indices and the recorded order follow the schedule, whatever order
        the calls finish in; nothing of a round that failed is recorded.
        """
        return await self._play(meetings, repeats, concurrent=self.concurrent)

    async def _play(self, meetings: Sequence[tuple[int, int]], repeats: int, *, concurrent: bool) -> list[list[float]]:
        slots = self._reserve(meetings, repeats)
        answers: list[Any] = [None] * len(slots)
        if concurrent and len(slots) > 1:
            per_pair: dict[frozenset[int], list[int]] = {}
            for index, slot in enumerate(slots):
                per_pair.setdefault(slot.key, []).append(index)

            async def judge_in_turn(indices: list[int]) -> None:
                for index in indices:
                    answers[index] = await self._acall(slots[index])

            await all_or_cancel(judge_in_turn(indices) for indices in per_pair.values())
        else:
            for index, slot in enumerate(slots):
                answers[index] = await self._acall(slot)
        out: list[list[float]] = [[] for _ in meetings]
        for index, (slot, (p, rewards, calls)) in enumerate(zip(slots, answers)):
            self._orientation.setdefault(slot.key, (slot.first, slot.second))
            self._values.setdefault(slot.key, []).append(p)
            self.judgements.append(Judgement(slot.first, slot.second, slot.repeat, p, rewards, calls))
            out[index // repeats].append(1.0 - p if slot.flip else p)
        return out

    def _reserve(self, meetings: Sequence[tuple[int, int]], repeats: int) -> list[_Slot]:
        """The round's judgements in schedule order, each with its pair's orientation and repeat index."""
        slots: list[_Slot] = []
        planned: dict[frozenset[int], int] = {}
        orientation: dict[frozenset[int], tuple[int, int]] = {}
        for a, b in meetings:
            key = frozenset((a, b))
            first, second = self._orientation.get(key) or orientation.setdefault(key, (a, b))
            for _ in range(repeats):
                repeat = self.repeats_done(a, b) + planned.get(key, 0)
                planned[key] = planned.get(key, 0) + 1
                slots.append(_Slot(key, first, second, repeat, first != a))
        return slots

    def slot_a_next(self, a: int, b: int) -> int | None:
        """Who sits in slot A when the pair {a, b} is judged next; None if it was never judged."""
        key = frozenset((a, b))
        if key not in self._orientation:
            return None
        first, second = self._orientation[key]
        return first if len(self._values[key]) % 2 == 0 else second

    async def _acall(self, slot: _Slot) -> tuple[float, PairRewards | None, tuple[str, ...]]:
        a, b = slot.first, slot.second
        ga, gb = (a, b) if self._index_map is None else (self._index_map[a], self._index_map[b])
        answer = await answer_of(self._judge, ga, gb, slot.repeat)
        return check_answer(answer, f"judge({ga}, {gb}, {slot.repeat})")
