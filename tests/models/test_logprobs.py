import math

import pytest

from veriscale.models.logprobs import MalformedLogprobs, NoLogprobs, first_position_top, label_distribution


def chat_payload(top):
    return {"choices": [{"logprobs": {"content": [{"token": "A", "logprob": 0.0,
                                                    "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in top]}]}}]}


def legacy_payload(top):
    return {"choices": [{"text": "A", "logprobs": {"tokens": ["A"], "top_logprobs": [{t: math.log(p) for t, p in top}]}}]}


@pytest.mark.parametrize("make", [chat_payload, legacy_payload])
def test_both_shapes_give_the_same_distribution(make):
    top = [("A", 0.5), (" B", 0.3), ("zzz", 0.1)]
    probs, mass, unseen = label_distribution(first_position_top(make(top)), ("A", "B", "C"))
    assert probs["A"] == pytest.approx(0.5 / 0.8) and probs["B"] == pytest.approx(0.3 / 0.8)
    assert probs["C"] == 0.0 and sum(probs.values()) == pytest.approx(1.0)
    assert mass == pytest.approx(0.8)
    assert unseen == pytest.approx(0.1)  # 1 - (0.5 + 0.3 + 0.1)


def test_space_variants_of_a_label_add_up():
    probs, mass, _ = label_distribution([("A", 0.2), (" A", 0.3), ("B", 0.5)], ("A", "B"))
    assert probs["A"] == pytest.approx(0.5) and mass == pytest.approx(1.0)


def test_missing_logprobs_and_malformed_are_told_apart():
    with pytest.raises(NoLogprobs):
        first_position_top({"choices": [{"message": {"content": "A"}}]})
    with pytest.raises(MalformedLogprobs):
        first_position_top({"choices": [{"logprobs": {"content": [{"token": "A", "top_logprobs": [{"token": "A", "logprob": "x"}]}]}}]})
    with pytest.raises(MalformedLogprobs):
        first_position_top({"choices": []})
    with pytest.raises(MalformedLogprobs):
        first_position_top({"choices": [{"logprobs": {"top_logprobs": ["nope"]}}]})
