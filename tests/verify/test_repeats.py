"""The one repeat rule: slot order alternates, sampling reseeds, K collapses without either."""

import pytest

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.engine.store import Store
from veriscale.verify.repeats import Repeat, distinct_repeats, repeat
from veriscale.verify.reward import Verifier

TASK = "Do the thing."


def test_pairwise_repeats_alternate_slot_order_and_collapse_to_both_orders_without_sampling():
    assert [repeat(r, pairwise=True, reasoning=False).order for r in range(4)] == ["AB", "BA", "AB", "BA"]
    assert repeat(3, pairwise=True, reasoning=False) == repeat(1, pairwise=True, reasoning=False) == Repeat(1, "BA", None)
    assert distinct_repeats(5, pairwise=True, reasoning=False) == [Repeat(0, "AB", None), Repeat(1, "BA", None)]
    assert distinct_repeats(5, pairwise=False, reasoning=False) == [Repeat(0, None, None)]


def test_sampled_repeats_are_each_their_own_computation():
    assert distinct_repeats(3, pairwise=True, reasoning=True, seed=7) == [
        Repeat(0, "AB", 7), Repeat(1, "BA", 8), Repeat(2, "AB", 9)]
    assert [r.seed for r in distinct_repeats(3, pairwise=False, reasoning=True, seed=7)] == [7, 8, 9]


@pytest.mark.parametrize("reasoning, new_calls", [(False, 0), (True, 2)])
def test_a_tournament_repeat_beyond_both_orders_is_new_only_when_sampling(tmp_path, reasoning, new_calls):
    model = ScriptedScoreModel()
    v = Verifier(model, store=Store.open(tmp_path / "s.sqlite3"), criteria="general", reasoning=reasoning)
    v.criteria = v.criteria.only(["Correctness"])
    first = v.compare(TASK, "GOOD answer", "bad answer", only_repeat=0)
    third = v.compare(TASK, "GOOD answer", "bad answer", only_repeat=2)
    assert {r.order for r in first.readings} == {r.order for r in third.readings} == {"AB"}
    assert third.usage.model_calls == new_calls
    if reasoning:
        assert {r.seed for r in third.readings} == {2}
