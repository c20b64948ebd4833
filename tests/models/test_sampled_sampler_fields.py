"""A sampled read sends llama.cpp's / vLLM's sampler fields (top_k 0, min_p 0, no repeat penalty) so
the draws follow the weights. A server that refuses those fields is read with OpenAI's fields only,
from then on, said in the plan's notes and under another cache key; a refusal of anything else fails
that read and changes nothing after it (it once switched the sampler for good, silently)."""

from __future__ import annotations

import pytest

from veriscale.errors import ModelCallError
from veriscale.models.sampled_read import FAITHFUL_SAMPLER_EXTRA, SERVER_SAMPLER_METHOD
from veriscale.models.uri import load_backend
from veriscale.verify.criteria import load_criteria
from veriscale.verify.prompts import pointwise_request
from veriscale.verify.scale import parse_scale

from tests.support.fault_server import FaultServer

DRAWS = 4


def draw_by_seed(body):
    """The test double's draw: A for an odd seed, B for an even one (so every draw is its seed's)."""
    return "A" if body.get("seed", 0) % 2 else "B"


def request():
    crit = load_criteria("general").items[0]
    return pointwise_request("What is 2 + 2?", "4", crit, "", parse_scale("letters:5"))


def sampler_extra_sent(srv):
    return [any(k in r["body"] for k in FAITHFUL_SAMPLER_EXTRA) for r in srv.requests]


def test_a_server_that_refuses_the_extra_fields_is_read_with_openais_and_says_so():
    with FaultServer(chat_reply=draw_by_seed) as srv:
        srv.unknown_fields = ("top_k",)
        model = load_backend(srv.url + f"?sample={DRAWS}#judge")
        before = model.fingerprint()
        first = model.score(request())
        # one refused request, then one a draw without the fields (seeds 0, 2, 3, 4: B, B, A, B)
        assert sampler_extra_sent(srv) == [True] + [False] * DRAWS
        assert (first.samples, first.label_probs["A"], first.label_probs["B"]) == (DRAWS, 0.25, 0.75)
        plan = model.read_plan()
        assert plan.method == SERVER_SAMPLER_METHOD
        assert [n for n in plan.notes if "refused top_k" in n and "OpenAI's sampler fields only" in n]
        assert model.fingerprint() != before  # readings from before and after never share a cache key
        model.score(request())
        assert sampler_extra_sent(srv)[1 + DRAWS:] == [False] * DRAWS  # the refusal is not asked again
        assert len([n for n in model.read_plan().notes if "refused top_k" in n]) == 1


def test_a_refusal_that_names_no_sampler_field_fails_the_read_and_changes_nothing():
    with FaultServer(chat_reply=draw_by_seed) as srv:
        model = load_backend(srv.url + f"?sample={DRAWS}#judge")
        before = model.fingerprint()
        srv.queue("refuse")
        with pytest.raises(ModelCallError, match="the request is invalid"):
            model.score(request())
        assert sampler_extra_sent(srv) == [True]  # not asked again without the fields
        second = model.score(request())
        assert sampler_extra_sent(srv)[1:] == [True] * DRAWS  # the faithful sampler, as before the refusal
        assert second.samples == DRAWS
        plan = model.read_plan()
        assert plan.method == "sample" and not [n for n in plan.notes if "refused" in n]
        assert model.fingerprint() == before
