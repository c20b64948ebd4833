"""The async tournaments: same results as the sync forms, and each round's meetings run concurrently.

The async judge answers what the sync oracle answers, after a delay that differs per call, so
calls finish in another order than they start: the results (judgements included, in order) must
still equal the sync form's. A barrier judge proves a round's meetings are in flight together.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.support.budget_sim import SimulatedCriteriaJudge, criteria_qualities
from tests.support.selection_sim import NoisyPreferenceOracle
from veriscale.errors import UserError
from veriscale.selection.budget.controller import BudgetController
from veriscale.selection.core.judging import JudgeLedger, PairVerdict
from veriscale.selection.core.schedules import ppt_comparison_count
from veriscale.selection.core.sparse import asparse_ranking, sparse_ranking
from veriscale.selection.core.tournament import (
    aknockout,
    apointwise,
    appt,
    around_robin,
    knockout,
    pointwise,
    ppt,
    round_robin,
)

HANG_GUARD_S = 60.0  # only against a hang: the tests finish in well under a second


def spaced_pool(n: int, seed: int, gap: float = 0.5, noise: float = 0.05) -> NoisyPreferenceOracle:
    qualities = np.random.default_rng(seed).permutation(n) * gap
    return NoisyPreferenceOracle(qualities, temperature=0.5, noise=noise, seed=seed)


class Recording:
    """A sync judge that records its calls."""

    def __init__(self, judge):
        self.judge, self.calls = judge, []

    def __call__(self, *args):
        self.calls.append(args)
        return self.judge(*args)


class Delayed:
    """An async judge answering what ``judge`` answers, after a delay that varies per call (so
    calls finish out of order); records starts and ends."""

    def __init__(self, judge):
        self.judge, self.calls, self.events, self.in_flight, self.most_in_flight = judge, [], [], 0, 0

    async def __call__(self, *args):
        self.calls.append(args)
        self.events.append(("start", args))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep((hash(args) % 7) * 0.0005)
        self.in_flight -= 1
        self.events.append(("end", args))
        return self.judge(*args)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, HANG_GUARD_S))


def same_result(sync_result, async_result, sync_calls, async_calls):
    assert async_result == sync_result  # winner, ranking, strengths, confidence, judgements in order, ...
    assert async_result.winner == sync_result.winner and async_result.ranking == sync_result.ranking
    assert async_result.confidence == sync_result.confidence
    assert sorted(async_calls) == sorted(sync_calls)
    assert len(set(async_calls)) == len(async_calls), "a (i, j, repeat) judgement was asked twice"


# ------------------------------------------------------------------ (a) same result, every method


@pytest.mark.parametrize("n,k,repeats,pivot_first", [(2, 1, 1, True), (3, 1, 2, True), (8, 2, 1, True),
                                                      (9, 3, 2, False), (12, 4, 1, True)])
def test_appt_gives_the_result_ppt_gives(n, k, repeats, pivot_first):
    sync_judge, async_judge = Recording(spaced_pool(n, seed=n)), Delayed(spaced_pool(n, seed=n))
    sync_result = ppt(n, sync_judge, k=k, repeats=repeats, seed=n, pivot_first=pivot_first)
    async_result = run(appt(n, async_judge, k=k, repeats=repeats, seed=n, pivot_first=pivot_first))
    same_result(sync_result, async_result, sync_judge.calls, async_judge.calls)
    assert async_result.n_comparisons == ppt_comparison_count(n, k)
    assert async_judge.most_in_flight > 1 or n == 2  # n = 2: the ring is one pair, met twice in turn


@pytest.mark.parametrize("n,repeats", [(2, 2), (5, 1), (6, 2), (7, 3)])
def test_around_robin_gives_the_result_round_robin_gives(n, repeats):
    sync_judge, async_judge = Recording(spaced_pool(n, seed=1)), Delayed(spaced_pool(n, seed=1))
    sync_result = round_robin(n, sync_judge, repeats=repeats, seed=2)
    async_result = run(around_robin(n, async_judge, repeats=repeats, seed=2))
    same_result(sync_result, async_result, sync_judge.calls, async_judge.calls)


@pytest.mark.parametrize("n,repeats,ties", [(2, 2, False), (7, 2, False), (8, 1, False), (9, 2, True)])
def test_aknockout_gives_the_result_knockout_gives(n, repeats, ties):
    def judge(i, j, r):  # ties: every match at exactly 0.5, so the seeded coins decide the bracket
        return 0.5 if ties else spaced_pool(n, seed=3)(i, j, r)

    sync_judge, async_judge = Recording(judge), Delayed(judge)
    sync_result = knockout(n, sync_judge, repeats=repeats, seed=5)
    async_result = run(aknockout(n, async_judge, repeats=repeats, seed=5))
    same_result(sync_result, async_result, sync_judge.calls, async_judge.calls)


def test_apointwise_gives_the_result_pointwise_gives_and_scores_concurrently():
    rewards = [0.3, 0.9, 0.1, 0.9, 0.5]
    groups = ["a", "b", "c", "b", "d"]
    started, ended = [], []

    async def ascore(i):
        started.append(i)
        await asyncio.sleep((5 - i) * 0.001)
        ended.append(i)
        return rewards[i]

    sync_result = pointwise(5, lambda i: rewards[i], groups=groups)
    async_result = run(apointwise(5, ascore, groups=groups))
    assert async_result == sync_result
    assert sorted(started) == [0, 1, 2, 4]  # one score per distinct output
    assert ended != started  # finished in another order, recorded in the candidates' order


@pytest.mark.parametrize("n,pivots,repeats", [(2, 0, 2), (5, 0, 2), (8, 1, 1), (8, 0, 2)])
def test_asparse_ranking_gives_the_result_sparse_ranking_gives(n, pivots, repeats):
    sync_judge, async_judge = Recording(spaced_pool(n, seed=4)), Delayed(spaced_pool(n, seed=4))
    sync_result = sparse_ranking(n, sync_judge, pivots=pivots, repeats=repeats, seed=4)
    async_result = run(asparse_ranking(n, async_judge, pivots=pivots, repeats=repeats, seed=4))
    same_result(sync_result, async_result, sync_judge.calls, async_judge.calls)


def test_groups_give_the_same_result_in_both_forms():
    groups = ["x", "y", "x", "z", "y", "w"]
    sync_judge, async_judge = Recording(spaced_pool(6, seed=8)), Delayed(spaced_pool(6, seed=8))
    sync_result = ppt(6, sync_judge, k=2, groups=groups, seed=8)
    async_result = run(appt(6, async_judge, k=2, groups=groups, seed=8))
    same_result(sync_result, async_result, sync_judge.calls, async_judge.calls)


@pytest.mark.parametrize("budget,joint", [("calls=40", False), ("calls=120", False), ("tokens=30000", True)])
def test_the_budget_controller_arun_takes_the_steps_run_takes(budget, joint):
    def make():
        return SimulatedCriteriaJudge(criteria_qualities(8, 3, seed=2), seed=2, joint=joint)

    sync_judge, async_sim = make(), make()

    class AsyncCosted:  # the same CostedJudge with an async __call__ (cost stays sync)
        n_levels, max_repeats, level_names = async_sim.n_levels, async_sim.max_repeats, async_sim.level_names
        cost = staticmethod(async_sim.cost)

        async def __call__(self, i, j, repeat, level):
            await asyncio.sleep(0)
            return async_sim(i, j, repeat, level)

    sync_outcome = BudgetController(budget, n_criteria=3, seed=1).run(8, sync_judge)
    async_outcome = run(BudgetController(budget, n_criteria=3, seed=1).arun(8, AsyncCosted()))
    assert async_outcome.result == sync_outcome.result
    assert async_outcome.to_dict() == sync_outcome.to_dict()
    assert async_sim.calls == sync_judge.calls


# ------------------------------------------------------------------ (b) concurrency


def test_a_pivot_round_is_in_flight_at_once_behind_a_barrier():
    """Every judge call of the first pivot round waits on a barrier of the round's size: played one
    meeting at a time it would never pass (the hang guard would fire); concurrently it does, and
    every call of the round starts before any of them ends."""
    n, k = 8, 2
    oracle = spaced_pool(n, seed=11)
    first_round = n - k  # the strongest pivot meets every non-pivot
    events: list[tuple[str, int]] = []

    async def main():
        ring_barrier, round_barrier = asyncio.Barrier(n), asyncio.Barrier(first_round)
        count = 0

        async def ajudge(i, j, repeat):
            nonlocal count
            call = count
            count += 1
            events.append(("start", call))
            if call < n:  # the ring is one concurrent round too
                await ring_barrier.wait()
            elif call < n + first_round:
                await round_barrier.wait()
            events.append(("end", call))
            return oracle(i, j, repeat)

        return await asyncio.wait_for(appt(n, ajudge, k=k, seed=11), HANG_GUARD_S)

    result = asyncio.run(main())
    assert result == ppt(n, spaced_pool(n, seed=11), k=k, seed=11)
    pivot_round = [e for e in events if n <= e[1] < n + first_round]
    kinds = [kind for kind, _ in pivot_round]
    assert kinds == ["start"] * first_round + ["end"] * first_round


def test_a_pairs_repeats_stay_in_turn_while_pairs_run_concurrently():
    log: list[tuple[str, int, int, int]] = []

    async def ajudge(i, j, repeat):
        log.append(("start", i, j, repeat))
        await asyncio.sleep(0.001 * (3 - repeat))
        log.append(("end", i, j, repeat))
        return 0.7

    ledger = JudgeLedger(ajudge, concurrent=True)
    got = run(ledger.aplay([(0, 1), (3, 2), (1, 0)], repeats=2))
    assert got == [[0.7, 0.7], [0.7, 0.7], [pytest.approx(0.3), pytest.approx(0.3)]]  # (1, 0) reuses (0, 1)'s orientation
    for pair in ((0, 1), (3, 2)):
        mine = [(kind, r) for kind, i, j, r in log if (i, j) == pair]
        repeats = 4 if pair == (0, 1) else 2
        assert mine == [e for r in range(repeats) for e in (("start", r), ("end", r))]
    assert [(j.i, j.j, j.repeat) for j in ledger.judgements] == [
        (0, 1, 0), (0, 1, 1), (3, 2, 0), (3, 2, 1), (0, 1, 2), (0, 1, 3)]  # the schedule's order
    assert log[:2] == [("start", 0, 1, 0), ("start", 3, 2, 0)]  # the two pairs in flight together


def test_a_failed_call_cancels_the_rest_of_its_round_and_records_nothing():
    cancelled = []

    async def ajudge(i, j, repeat):
        if (i, j) == (2, 3):
            await asyncio.sleep(0)
            raise RuntimeError("backend down")
        try:
            await asyncio.sleep(HANG_GUARD_S)
        except asyncio.CancelledError:
            cancelled.append((i, j))
            raise
        return 0.5

    ledger = JudgeLedger(ajudge, concurrent=True)
    with pytest.raises(RuntimeError, match="backend down"):
        run(ledger.aplay([(0, 1), (2, 3), (4, 5)]))
    assert sorted(cancelled) == [(0, 1), (4, 5)]
    assert ledger.judgements == [] and ledger.judged_pairs() == []


def test_verdicts_keep_their_rewards_and_calls_in_the_async_form():
    async def ajudge(i, j, repeat):
        return PairVerdict(0.8, {"Output": (0.9, 0.1)}, (f"key-{i}-{j}-{repeat}",))

    result = run(around_robin(3, ajudge, repeats=1))
    assert {c.calls for c in result.comparisons} == {(f"key-{c.i}-{c.j}-{c.repeat}",) for c in result.comparisons}
    assert all(c.rewards == {"Output": (0.9, 0.1)} for c in result.comparisons)


# ------------------------------------------------------------------ (c) adaptive stops


ADAPTIVE_CASES = [(1.5, 0.0, 2), (0.05, 0.2, 2), (0.3, 0.1, 3), (0.2, 0.05, 4)]


@pytest.mark.parametrize("method", ["ppt", "round_robin"])
@pytest.mark.parametrize("gap,noise,seed", ADAPTIVE_CASES)
def test_adaptive_play_stops_at_the_same_point_in_both_forms(method, gap, noise, seed):
    n = 7
    sync_judge = Recording(spaced_pool(n, seed=seed, gap=gap, noise=noise))
    async_judge = Delayed(spaced_pool(n, seed=seed, gap=gap, noise=noise))
    options = dict(adaptive=True, min_confidence=0.9, max_repeats=4, seed=seed)
    if method == "ppt":
        sync_result = ppt(n, sync_judge, k=3, **options)
        async_result = run(appt(n, async_judge, k=3, **options))
    else:
        sync_result = round_robin(n, sync_judge, **options)
        async_result = run(around_robin(n, async_judge, **options))
    same_result(sync_result, async_result, sync_judge.calls, async_judge.calls)
    assert async_result.stop_reason == sync_result.stop_reason
    assert async_result.n_judgements == sync_result.n_judgements
    assert async_result.judgements_saved == sync_result.judgements_saved


def test_the_adaptive_cases_cover_an_early_stop_and_extra_repeats():
    """The parameters above reach both ends of adaptive play (else the test above proves less)."""
    seen = set()
    for gap, noise, seed in ADAPTIVE_CASES:
        for method in (ppt, round_robin):
            result = method(7, spaced_pool(7, seed=seed, gap=gap, noise=noise), adaptive=True, seed=seed)
            extra = result.n_judgements > result.n_comparisons  # close pairs judged again
            seen.add((result.stop_reason, extra))
    assert {("confident", False), ("confident", True), ("max repeats", True)} <= seen


# ------------------------------------------------------------------ sync wrappers


def test_the_sync_forms_still_run_inside_a_running_loop():
    """The sync forms drive the async code without a loop of their own, so a sync judge works from
    any thread, one running a loop included (as before)."""

    async def main():
        return ppt(6, spaced_pool(6, seed=2), k=2, seed=2)

    assert asyncio.run(main()) == ppt(6, spaced_pool(6, seed=2), k=2, seed=2)


def test_a_sync_form_refuses_an_async_judge_naming_the_async_form():
    async def ajudge(i, j, repeat):
        return 0.5

    with pytest.raises(UserError, match="appt"):
        ppt(4, ajudge, k=1)
    async def ascore(i):
        return 0.5

    with pytest.raises(UserError, match="apointwise"):
        pointwise(3, ascore)


# ------------------------------------------------------------------ VerifierJudge's awaited forms


def test_verifier_judge_acompare_and_ascore_give_what_the_sync_judge_gives():
    from tests.selection.test_select import TASK, ScriptedVerifierDouble, pool
    from veriscale.selection.judge import VerifierJudge
    from veriscale.selection.select import plan_selection

    class AsyncVerifierDouble(ScriptedVerifierDouble):
        async def acompare(self, task, a, b, *, only_repeat=None):
            await asyncio.sleep(0.0005 * (hash((a, b, only_repeat)) % 5))
            return self.compare(task, a, b, only_repeat=only_repeat)

        async def ascore(self, task, text):
            await asyncio.sleep(0)
            return self.score(task, text)

    cands, q = pool([0.2, 0.5, 0.4, 0.9, 0.1, 0.45])
    sync_double, async_double = ScriptedVerifierDouble(q), AsyncVerifierDouble(q)
    plan = plan_selection(TASK, cands, verifier=sync_double, method="ppt", k=2, adaptive=False)
    sync_judge, async_judge = VerifierJudge(sync_double, plan.pool), VerifierJudge(async_double, plan.pool)
    # the sync tournaments drive the same judge one awaited verdict at a time
    assert run(appt(6, async_judge.acompare, k=2, seed=3)) == ppt(6, lambda *a: run(sync_judge.acompare(*a)), k=2,
                                                                   seed=3)
    assert sorted(async_double.compare_calls, key=str) == sorted(sync_double.compare_calls, key=str)
    assert run(apointwise(6, async_judge.ascore)) == pointwise(6, lambda i: run(sync_judge.ascore(i)))
    assert (async_judge.verdicts, async_judge.low_label_mass) == (sync_judge.verdicts, sync_judge.low_label_mass)
