"""Tournaments over a simulated judge: comparison counts, slot balance, recovery, adaptivity."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from veriscale.errors import UserError
from tests.support.selection_sim import NoisyPreferenceOracle
from veriscale.selection.core.tournament import (
    knockout,
    pointwise,
    ppt,
    ppt_comparison_count,
    round_robin,
)


class RecordingJudge:
    """Wraps a judge and records each call."""

    def __init__(self, judge):
        self.judge = judge
        self.calls: list[tuple[int, int, int]] = []

    def __call__(self, i, j, repeat):
        self.calls.append((i, j, repeat))
        return self.judge(i, j, repeat)


def spaced_pool(n: int, seed: int, gap: float = 0.5, noise: float = 0.05) -> NoisyPreferenceOracle:
    """Qualities 0, gap, 2·gap, … in a seeded shuffled order."""
    qualities = np.random.default_rng(seed).permutation(n) * gap
    return NoisyPreferenceOracle(qualities, temperature=0.5, noise=noise, seed=seed)


def slot_a(call: tuple[int, int, int]) -> int:
    i, j, repeat = call
    return i if repeat % 2 == 0 else j


def slot_b(call: tuple[int, int, int]) -> int:
    i, j, repeat = call
    return j if repeat % 2 == 0 else i


# ------------------------------------------------------------------ PPT counts and ring


@pytest.mark.parametrize("n", [2, 3, 5, 8, 13, 20])
def test_ppt_comparison_count_matches_the_paper_formula(n):
    for k in sorted(k for k in {1, 2, 3, n // 2, n - 1, n} if 1 <= k <= n):
        judge = RecordingJudge(spaced_pool(n, seed=k))
        result = ppt(n, judge, k=k, seed=k)
        expected = n + k * (n - k) + k * (k - 1) // 2
        assert result.n_comparisons == expected == ppt_comparison_count(n, k)
        assert result.n_judgements == len(judge.calls) == expected
        assert len(set(judge.calls)) == len(judge.calls), "a (i, j, repeat) judgement was asked twice"
        assert result.n_distinct_pairs == len({frozenset(c[:2]) for c in judge.calls})


def test_ppt_with_repeats_multiplies_judge_calls_not_comparisons():
    judge = RecordingJudge(spaced_pool(9, seed=1))
    result = ppt(9, judge, k=3, repeats=2, seed=1)
    assert result.n_comparisons == ppt_comparison_count(9, 3)
    assert len(judge.calls) == 2 * ppt_comparison_count(9, 3)


@pytest.mark.parametrize("n", [2, 3, 4, 7, 12])
def test_ring_pass_puts_each_candidate_once_in_slot_a_and_once_in_slot_b(n):
    judge = RecordingJudge(spaced_pool(n, seed=n))
    ppt(n, judge, k=1, seed=n)
    ring = judge.calls[:n]
    assert Counter(slot_a(c) for c in ring) == Counter(range(n))
    assert Counter(slot_b(c) for c in ring) == Counter(range(n))


def test_pivot_rounds_meet_every_non_pivot_and_each_other_and_rejudge_ring_pairs():
    n, k = 10, 3
    judge = RecordingJudge(spaced_pool(n, seed=3))
    result = ppt(n, judge, k=k, seed=3)
    ring_pairs = [frozenset(c[:2]) for c in judge.calls[:n]]
    pivot_pairs = [frozenset(c[:2]) for c in judge.calls[n:]]
    pivots = set(result.pivots)
    expected = {frozenset((p, m)) for p in pivots for m in range(n) if m != p}
    assert set(pivot_pairs) == expected
    assert len(pivot_pairs) == len(expected)
    rejudged = set(ring_pairs) & set(pivot_pairs)
    assert rejudged, "with k=3 of 10 some ring neighbours of a pivot are met again"
    for pair in rejudged:
        repeats = sorted(c[2] for c in judge.calls if frozenset(c[:2]) == pair)
        assert repeats == list(range(len(repeats))), "a re-judged pair continues with the next repeat index"


def test_ppt_pivots_are_the_ring_leaders():
    oracle = NoisyPreferenceOracle([0.0, 3.0, 0.2, 2.8, 0.1, 0.3], noise=0.0)
    result = ppt(6, oracle, k=2, seed=0)
    assert set(result.pivots) == {1, 3}
    assert result.winner == 1


# ------------------------------------------------------------------ round robin and slots


def test_round_robin_judges_every_pair_in_both_slot_orders():
    n = 6
    judge = RecordingJudge(spaced_pool(n, seed=2))
    result = round_robin(n, judge, seed=2)
    assert result.n_comparisons == result.n_distinct_pairs == n * (n - 1) // 2
    assert result.n_judgements == len(judge.calls) == n * (n - 1)
    for pair in itertools.combinations(range(n), 2):
        calls = [c for c in judge.calls if set(c[:2]) == set(pair)]
        assert {slot_a(c) for c in calls} == set(pair)


@pytest.mark.parametrize("n", [5, 6, 9])
def test_single_repeat_round_robin_balances_slot_a_within_one(n):
    judge = RecordingJudge(spaced_pool(n, seed=0))
    round_robin(n, judge, repeats=1)
    counts = Counter(slot_a(c) for c in judge.calls)
    assert all(abs(counts[c] - (n - 1) / 2) <= 1 for c in range(n))


def test_both_slot_orders_cancel_a_slot_biased_judge():
    oracle = NoisyPreferenceOracle([0.0] * 4, noise=0.0, slot_bias=0.3)
    result = round_robin(4, oracle)
    np.testing.assert_allclose(result.strengths, 0.0, atol=1e-6)
    assert len(result.ties) == 6
    assert result.confidence < 0.5


# ------------------------------------------------------------------ recovery on a simulated oracle


@pytest.mark.parametrize(
    "method",
    [
        lambda n, j, s: round_robin(n, j, seed=s),
        lambda n, j, s: ppt(n, j, k=2, seed=s),
        lambda n, j, s: knockout(n, j, seed=s),
        lambda n, j, s: round_robin(n, j, seed=s, adaptive=True),
        lambda n, j, s: ppt(n, j, k=3, seed=s, adaptive=True),
    ],
    ids=["round_robin", "ppt", "knockout", "round_robin-adaptive", "ppt-adaptive"],
)
def test_true_best_is_picked_at_low_noise(method):
    for seed in range(12):
        oracle = spaced_pool(8, seed=seed, noise=0.03)
        result = method(8, oracle, seed)
        assert result.winner == oracle.best
        assert result.ranking[0] == result.winner
        assert sorted(result.ranking) == list(range(8))
        assert abs(sum(result.win_mass) - 1.0) < 1e-9


def test_ppt_recovers_the_full_order_when_everyone_meets_a_pivot():
    oracle = spaced_pool(7, seed=9, noise=0.01)
    result = ppt(7, oracle, k=7, seed=9)
    assert list(result.ranking) == list(np.argsort(-oracle.qualities))


# ------------------------------------------------------------------ adaptive mode


def test_adaptive_ppt_saves_calls_on_an_easy_pool_and_keeps_the_winner():
    oracle = NoisyPreferenceOracle([0.0, 0.5, 4.0, 1.0, -0.5, 0.2, 0.8, -1.0, 0.3, 0.1], noise=0.02, seed=1)
    full = ppt(10, oracle, k=4, seed=3)
    fast = ppt(10, oracle, k=4, seed=3, adaptive=True)
    assert fast.winner == full.winner == 2
    assert fast.stop_reason == "confident"
    assert fast.confidence >= 0.9
    assert fast.n_judgements < full.n_judgements
    assert fast.judgements_saved == full.n_judgements - fast.n_judgements > 0
    assert fast.judgements_planned == full.n_judgements


def test_adaptive_round_robin_saves_calls_on_an_easy_pool_and_keeps_the_winner():
    oracle = NoisyPreferenceOracle([0.0, 0.5, 4.0, 1.0, -0.5, 0.2], noise=0.02, seed=1)
    full = round_robin(6, oracle)
    fast = round_robin(6, oracle, adaptive=True)
    assert fast.winner == full.winner == 2
    assert fast.stop_reason == "confident"
    assert fast.judgements_saved == full.n_judgements - fast.n_judgements > 0


def test_adaptive_re_judges_only_the_leaders_close_comparison_up_to_max_repeats():
    oracle = NoisyPreferenceOracle([1.0, 0.98, -3.0, -3.5, -4.0], noise=0.05, seed=0)
    judge = RecordingJudge(oracle)
    result = round_robin(5, judge, adaptive=True, min_confidence=0.99, max_repeats=3)
    extra = [c for c in judge.calls if c[2] >= 1]
    assert extra, "a near-tie at the top must trigger extra repeats"
    assert {frozenset(c[:2]) for c in extra} == {frozenset((0, 1))}
    assert max(c[2] for c in judge.calls) == 2  # repeats 0, 1, 2 = max_repeats judgements
    assert result.stop_reason == "max repeats"
    assert result.judgements_saved == 20 - len(judge.calls)
    assert {slot_a(c) for c in judge.calls if set(c[:2]) == {0, 1}} == {0, 1}


def test_same_seed_same_comparisons_and_result():
    for run in (
        lambda s: ppt(9, spaced_pool(9, seed=4, noise=0.2), k=3, seed=s, adaptive=True),
        lambda s: round_robin(9, spaced_pool(9, seed=4, noise=0.2), seed=s, adaptive=True),
        lambda s: knockout(9, spaced_pool(9, seed=4, noise=0.2), seed=s),
    ):
        assert run(11) == run(11)
    assert ppt(9, spaced_pool(9, 4), seed=1).comparisons[:9] != ppt(9, spaced_pool(9, 4), seed=2).comparisons[:9]


# ------------------------------------------------------------------ small N and errors


@pytest.mark.parametrize(
    "method",
    [
        lambda n, j: ppt(n, j, k=1),
        lambda n, j: round_robin(n, j),
        lambda n, j: round_robin(n, j, adaptive=True),
        lambda n, j: knockout(n, j),
        lambda n, j: pointwise(n, lambda i: 0.5),
    ],
    ids=["ppt", "round_robin", "round_robin-adaptive", "knockout", "pointwise"],
)
def test_single_candidate_is_returned_without_comparisons(method):
    judge = RecordingJudge(lambda i, j, r: 0.5)
    result = method(1, judge)
    assert result.winner == 0
    assert result.ranking == (0,)
    assert result.comparisons == ()
    assert result.n_comparisons == 0
    assert judge.calls == []


def test_two_candidates():
    oracle = NoisyPreferenceOracle([0.0, 1.0], noise=0.0)
    for k in (1, 2):
        result = ppt(2, oracle, k=k)
        assert result.winner == 1
        assert result.n_comparisons == 3
    assert knockout(2, oracle).winner == 1
    assert round_robin(2, oracle).n_judgements == 2


@pytest.mark.parametrize(
    "call",
    [
        lambda: ppt(0, lambda i, j, r: 0.5),
        lambda: round_robin(0, lambda i, j, r: 0.5),
        lambda: knockout(0, lambda i, j, r: 0.5),
        lambda: pointwise(0, lambda i: 0.5),
        lambda: ppt(5, lambda i, j, r: 0.5, k=0),
        lambda: ppt(5, lambda i, j, r: 0.5, k=6),
        lambda: ppt(5, lambda i, j, r: 0.5, k=2.5),
        lambda: round_robin(3, lambda i, j, r: 0.5, repeats=0),
        lambda: round_robin(3, lambda i, j, r: 1.5),
        lambda: ppt(3, lambda i, j, r: float("nan"), k=1),
        lambda: round_robin(3, lambda i, j, r: 0.5, adaptive=True, min_confidence=0.0),
        lambda: round_robin(3, lambda i, j, r: 0.5, adaptive=True, max_repeats=1),
        lambda: ppt(3, lambda i, j, r: 0.5, groups=["a", "b"]),
        lambda: pointwise(2, lambda i: float("inf")),
        lambda: round_robin(3, "not a judge"),
    ],
)
def test_bad_input_raises_one_user_error(call):
    with pytest.raises(UserError):
        call()


# ------------------------------------------------------------------ identical candidates


def test_identical_candidates_are_judged_once_and_share_the_result():
    groups = ["a", "b", "a", "c", "b", "a"]
    qualities = {"a": 0.0, "b": 2.0, "c": 1.0}
    judge = RecordingJudge(NoisyPreferenceOracle([qualities[g] for g in groups], noise=0.02, seed=5))
    result = round_robin(6, judge, groups=groups)
    assert {i for c in judge.calls for i in c[:2]} == {0, 1, 3}
    assert len(judge.calls) == 6  # 3 distinct outputs, 3 pairs, 2 repeats
    assert result.winner == 1
    assert result.ranking == (1, 4, 3, 0, 2, 5)
    assert result.strengths[0] == result.strengths[2] == result.strengths[5]
    assert result.strengths[1] == result.strengths[4]
    assert {(0, 2), (0, 5), (2, 5), (1, 4)} <= set(result.ties)
    assert abs(sum(result.win_mass) - 1.0) < 1e-9


def test_groups_work_with_ppt_and_cap_k_at_the_distinct_outputs():
    groups = [0, 0, 1, 1, 2]
    judge = RecordingJudge(NoisyPreferenceOracle([1.0, 1.0, 0.0, 0.0, 3.0], noise=0.02, seed=2))
    result = ppt(5, judge, k=4, groups=groups)
    assert result.n_comparisons == ppt_comparison_count(3, 3)
    assert result.winner == 4
    assert {i for c in judge.calls for i in c[:2]} == {0, 2, 4}


# ------------------------------------------------------------------ knockout and pointwise


def test_knockout_with_byes_plays_n_minus_one_matches():
    judge = RecordingJudge(spaced_pool(7, seed=6, noise=0.02))
    result = knockout(7, judge, seed=6)
    assert result.n_comparisons == 6
    assert len(judge.calls) == 12
    assert result.winner == judge.judge.best
    assert result.ranking[0] == result.winner


def test_pointwise_picks_the_argmax_and_reports_ties():
    scores = [0.3, 0.9, 0.9, 0.1]
    result = pointwise(4, lambda i: scores[i])
    assert result.winner == 1
    assert result.ranking == (1, 2, 0, 3)
    assert (1, 2) in result.ties
    assert result.n_judgements == 4
    assert result.confidence is None
    assert abs(sum(result.win_mass) - 1.0) < 1e-9


def test_result_serialises_to_plain_json():
    import json

    result = ppt(4, spaced_pool(4, seed=1), k=2)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["method"] == "ppt"
    assert len(data["comparisons"]) == result.n_judgements
    assert set(data["comparisons"][0]) == {"i", "j", "repeat", "p"}


# ------------------------------------------------------------------ pivot-first order (KV prefix reuse)


def _first_response_switches(calls) -> int:
    """How often the candidate shown first changes between consecutive judgements: each change
    makes a KV cache evaluate the new first response (the prompt shows it before the second)."""
    firsts = [slot_a(c) for c in calls]
    return sum(a != b for a, b in zip(firsts, firsts[1:]))


@pytest.mark.parametrize("n, k, seed", [(5, 2, 0), (10, 3, 3), (20, 4, 1)])
def test_a_pivot_is_shown_first_in_its_round_except_where_the_ring_already_showed_it_first(n, k, seed):
    judge = RecordingJudge(spaced_pool(n, seed=seed))
    result = ppt(n, judge, k=k, seed=seed)
    ring, rest = judge.calls[:n], judge.calls[n:]
    ring_first = {frozenset(c[:2]): slot_a(c) for c in ring}
    at = 0
    for s, pivot in enumerate(result.pivots):
        meetings = rest[at:at + n - k + s]  # every non-pivot, then the earlier pivots
        at += len(meetings)
        assert all(pivot in c[:2] for c in meetings)
        shown = [slot_a(c) == pivot for c in meetings]
        assert shown == sorted(shown, reverse=True), "the pivot-first meetings come first, in a row"
        for c in meetings:
            pair = frozenset(c[:2])
            assert (slot_a(c) == pivot) == (ring_first.get(pair) != pivot), "a ring pair is rejudged in its other order"


@pytest.mark.parametrize("n, k, seed", [(5, 2, 0), (10, 3, 3), (20, 4, 1)])
def test_pivot_first_order_changes_the_first_response_less_often_than_the_alternating_one(n, k, seed):
    pivot_first, alternating = RecordingJudge(spaced_pool(n, seed=seed)), RecordingJudge(spaced_pool(n, seed=seed))
    ppt(n, pivot_first, k=k, seed=seed)
    ppt(n, alternating, k=k, seed=seed, pivot_first=False)
    assert len(pivot_first.calls) == len(alternating.calls) == ppt_comparison_count(n, k)
    assert _first_response_switches(pivot_first.calls) < _first_response_switches(alternating.calls)
    assert len(set(pivot_first.calls)) == len(pivot_first.calls), "no judgement asked twice"


def test_ledger_says_who_takes_slot_a_at_a_pairs_next_judgement():
    from veriscale.selection.core.judging import JudgeLedger

    ledger = JudgeLedger(lambda i, j, r: 0.5)
    assert ledger.slot_a_next(2, 5) is None
    ledger.judge_pair(2, 5)
    assert ledger.slot_a_next(5, 2) == 5  # judged 2-first: next time 5 is first
    ledger.judge_pair(5, 2)
    assert ledger.slot_a_next(2, 5) == 2
