"""Joint requests on the real embedded model: every slot exact, teacher-forced, at a few tokens each."""

import dataclasses

import pytest

from veriscale.verify.criteria import load_criteria
from veriscale.verify.joint_prompts import joint_pairwise_request
from veriscale.verify.scale import parse_scale

pytestmark = pytest.mark.embedded
TASK = "Sort numbers.txt numerically into out.txt."
A, B = "I ran sort -n numbers.txt > out.txt and checked out.txt.", "I could not find the file."


def test_each_joint_slot_equals_the_one_slot_request_at_its_position(embedded_model):
    crits = load_criteria("agent")
    req = joint_pairwise_request(TASK, A, B, crits.items, crits.note, parse_scale("letters:5"))
    joint = embedded_model.score(req)
    assert len(joint.slots) == 6
    assert joint.label_probs == joint.slots[0]["label_probs"]
    prefill = req.prefill
    for i, slot in enumerate(joint.slots):
        probs = slot["label_probs"]
        assert slot["written"] == max(probs, key=probs.get)  # the argmax label is what is written
        alone = embedded_model.score(dataclasses.replace(req, prefill=prefill, joint=()))
        assert alone.label_probs == pytest.approx(probs, abs=1e-9)
        assert alone.label_mass == pytest.approx(slot["label_mass"], abs=1e-9)
        if i < len(req.joint):
            prefill += f" {slot['written']}{req.joint[i]}"
    # every further slot costs a few tokens: far fewer than the prompt once per slot
    assert joint.prompt_tokens < joint.prompt_tokens_total + 6 * 20


def test_a_reading_does_not_depend_on_what_the_kv_cache_held_before(embedded_model):
    """A prompt read right after a longer one that extends it (a KV-prefix hit leaving one token to
    evaluate) gives the distribution the same prompt gives read cold: llama.cpp's one-token batch
    kernel differs in the last digits, so no slot is ever read from a one-token batch."""
    crits = load_criteria("agent")
    req = joint_pairwise_request(TASK, A, B, crits.items, crits.note, parse_scale("letters:5"))
    alone = dataclasses.replace(req, joint=())
    longer = dataclasses.replace(alone, prefill=req.prefill + " A" + req.joint[0])
    embedded_model.reuse_prefix = False
    try:
        cold = embedded_model.score(alone)
    finally:
        embedded_model.reuse_prefix = True
    embedded_model.score(longer)
    warm = embedded_model.score(alone)
    assert warm.prompt_tokens < 10  # the prefix came from the cache
    assert warm.label_probs == pytest.approx(cold.label_probs, abs=1e-12)
