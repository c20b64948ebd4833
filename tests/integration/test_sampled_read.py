"""``?sample=N``: the slot read by N draws of the grade at temperature 1, through a real
llama_cpp.server (its ``n`` gives one choice, so each draw is its own seeded request).

Model cost: 1 criterion x 2 slots x 16 draws = 32 three-token completions, plus the same again
from the cache-free rerun."""

from __future__ import annotations

import json

import pytest

from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.models.uri import load_backend
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

pytestmark = pytest.mark.server
DRAWS = 16  # at T = 1 about a third of SmolLM2's draws write a label: 16 leave none empty


def compare(model, store, refresh=False):
    return Verifier(model, store=store, criteria=load_criteria("general").only(["Correctness"]), scale="letters:5",
                    injection_detect=False, refresh=refresh).compare("What is 2 + 2?", "4", "5")


def test_a_sampled_read_is_marked_counted_and_reproducible(llama_server, tmp_path):
    model = load_backend(f"{llama_server}?template=chatml&sample={DRAWS}#smollm2")
    assert model.read_plan().strategy == "sampled"
    store = Store.open(tmp_path / "s.sqlite3")
    first = compare(model, store)
    assert any(r.value is not None for r in first.readings)
    for r in first.readings:
        if r.value is None:  # a weak model at T = 1 may write no label in any draw: a failed call, said so
            assert "no probability on any score label" in (r.error or "")
        else:
            assert (r.strategy, r.samples) == ("sampled", DRAWS)
            # the mass is the share of the DRAWS draws that wrote a label
            assert r.label_mass * DRAWS == pytest.approx(round(r.label_mass * DRAWS))
            assert sum(r.label_probs.values()) == pytest.approx(1.0)
            assert r.value_se is not None or round(r.label_mass * DRAWS) < 2
    d = json.loads(json.dumps(first.to_dict(), allow_nan=False))
    assert d["read_strategies"] == ["sampled"] and "reward_a_se" in d and "reward_b_se" in d
    assert first.usage.prompt_tokens > 0  # every draw's prompt is counted
    again = compare(model, store, refresh=True)  # the same seeds: the same draws
    assert [r.label_probs for r in again.readings] == [r.label_probs for r in first.readings]


@pytest.mark.parametrize("query", ["sample=1", "sample=0", "sample=x"])
def test_too_few_or_no_draws_is_one_sentence(llama_server, query):
    with pytest.raises(UserError) as err:
        load_backend(f"{llama_server}?template=chatml&{query}#smollm2")
    assert "sample" in str(err.value) and "\n" not in str(err.value)


def test_the_embedded_model_cannot_sample_and_says_so():
    with pytest.raises(UserError, match="takes threads and context"):
        load_backend("embedded?sample=8")
