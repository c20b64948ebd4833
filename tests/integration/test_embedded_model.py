"""The real embedded SmolLM2 model, loaded in process (few, small calls)."""

import pytest

from veriscale.engine.store import Store
from veriscale.models.base import Message, ScoreRequest
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

pytestmark = pytest.mark.embedded
TASK = "What is 12 * 12? Answer with the number."


def test_exact_label_distribution_sums_to_one(embedded_model):
    labels = tuple("ABCDE")
    resp = embedded_model.score(ScoreRequest(messages=(Message("user", "Grade the answer 144 to 12*12 from A (best) to E."),),
                                             prefill="Grade:", labels=labels))
    assert sum(resp.label_probs.values()) == pytest.approx(1.0)
    assert 0 < resp.label_mass <= 1 and resp.unseen_mass == 0.0
    assert resp.prompt_tokens_total > 10


def test_letters_are_single_tokens_and_long_words_are_not(embedded_model):
    assert embedded_model.single_token_labels(tuple("ABCDEFGHIJKLMNOPQRST")) == []
    assert embedded_model.single_token_labels(("Unsatisfactorily",)) == ["Unsatisfactorily"]


def test_prefix_reuse_processes_only_the_differing_suffix(embedded_model, tmp_path):
    crits = load_criteria("general")
    v = Verifier(embedded_model, store=None, criteria=crits, repeats=1)
    embedded_model.reuse_prefix = False
    try:
        cold_usage = v.compare(TASK, "144", "124").usage
    finally:
        embedded_model.reuse_prefix = True
    embedded_model._eval_prompt([embedded_model._llm.token_bos()])  # start from a foreign cache
    warm_usage = v.compare(TASK, "144", "124").usage
    cold, warm = cold_usage.processed_prompt_tokens, warm_usage.processed_prompt_tokens
    assert warm * 2 <= cold, (warm, cold)
    # the model's own KV reuse is counted: the same prompts are sent, the reused part is "cached"
    assert warm_usage.prompt_tokens == cold_usage.prompt_tokens == cold
    assert cold_usage.cached_prompt_tokens == 0 and warm_usage.unreported_calls == 0
    assert warm_usage.cached_prompt_tokens == warm_usage.prompt_tokens - warm > 0
    assert warm_usage.to_dict()["prompt_tokens_processed"] == warm


def test_compare_then_rerun_makes_zero_model_calls(embedded_model, tmp_path):
    store = Store.open(tmp_path / "s.sqlite3")
    crits = load_criteria("general").only(["Correctness"])
    first = Verifier(embedded_model, store=store, criteria=crits).compare(TASK, "144", "124")
    assert first.usage.model_calls == 4 and first.p_a_wins is not None
    for c in first.criteria.values():
        assert sum(c["label_probs"]["a"].values()) == pytest.approx(1.0)
    second = Verifier(embedded_model, store=store, criteria=crits).compare(TASK, "144", "124")
    assert second.usage.model_calls == 0 and second.usage.cache_hits == 4
    assert second.p_a_wins == pytest.approx(first.p_a_wins)


def test_prompt_longer_than_context_is_a_user_error(embedded_model):
    from veriscale.errors import UserError

    huge = "word " * 9000
    with pytest.raises(UserError, match="more than the embedded model's context"):
        Verifier(embedded_model, store=None).score(TASK, huge)
