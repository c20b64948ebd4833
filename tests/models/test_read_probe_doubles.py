"""The read probe and the slot reads against recording doubles of vLLM and SGLang (test doubles,
named as such: their field rules come from the released source, see tests/support/server_doubles).

The doubles' score labels sit below the top 20 tokens, so a top-20 read sees little of them; an
exact read must give their true distribution, whitespace path included."""

from __future__ import annotations

import pytest

from tests.support.server_doubles import IDS, SLOT, TRUE_LABELS, ServerDouble
from veriscale.models.base import Message, ScoreRequest
from veriscale.models.uri import load_backend

LABELS = tuple("ABCDE")
REQUEST = ScoreRequest(messages=(Message("user", "Grade the answer from A to E."),), prefill="Grade:", labels=LABELS)


def truth() -> dict[str, float]:
    total = sum(TRUE_LABELS.values())
    return {lab: p / total for lab, p in TRUE_LABELS.items()}


def close(got: dict[str, float], want: dict[str, float]) -> bool:
    return 0.5 * sum(abs(got[k] - want[k]) for k in want) < 1e-9


@pytest.mark.parametrize("suffix", ["#judge", "?template=chatml#judge"])
def test_vllm_exact_read_by_logprob_token_ids(suffix):
    with ServerDouble("vllm") as srv:
        model = load_backend(srv.url + suffix)
        plan = model.read_plan()
        assert (plan.strategy, plan.method, plan.prefilled) == ("exact", "logprob_token_ids", True)
        resp = model.score(REQUEST)
        assert (resp.strategy, resp.prefilled, resp.unseen_mass) == ("exact", True, 0.0)
        assert close(resp.label_probs, truth())
        assert resp.label_mass == pytest.approx(sum(TRUE_LABELS.values()))
        path, body = srv.bodies[-2]  # the slot read, then its newline path
        assert sorted(body["logprob_token_ids"]) == sorted({IDS[t] for t in (*LABELS, *(" " + x for x in LABELS), " ", "\n", " zebra")})
        if path.endswith("/chat/completions"):
            assert body["logprobs"] is True and "top_logprobs" not in body
            assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
            assert body["messages"][-1] == {"role": "assistant", "content": "Grade:"}
            assert srv.bodies[-1][1]["messages"][-1]["content"] == "Grade:\n"
        else:
            assert body["logprobs"] == len(body["logprob_token_ids"])
            assert body["prompt"].endswith("<|im_start|>assistant\nGrade:")


def test_sglang_prefills_the_chat_turn_and_reads_wide():
    with ServerDouble("sglang") as srv:
        model = load_backend(srv.url + "#judge")
        plan = model.read_plan()
        assert (plan.strategy, plan.method, plan.prefilled) == ("exact", "wide-logprobs", True)
        resp = model.score(REQUEST)
        assert resp.strategy == "exact" and close(resp.label_probs, truth())
        body = srv.bodies[-2][1]
        assert body["top_logprobs"] == 1000 and body["continue_final_message"] is True


def test_a_top20_read_of_the_same_slot_is_not_the_weights_distribution():
    """What the probe saves the user from: the labels below the cut are lost."""
    top20 = dict(sorted(SLOT.items(), key=lambda kv: -kv[1])[:20])
    seen = {lab: top20.get(lab, 0) + top20.get(" " + lab, 0) for lab in LABELS}
    total = sum(seen.values())
    assert total == 0 or not close({k: v / total for k, v in seen.items()}, truth())


def test_a_server_that_refuses_the_plan_midrun_falls_back_with_a_note():
    with ServerDouble("vllm") as srv:
        model = load_backend(srv.url + "?template=chatml#judge")
        assert model.read_plan().method == "logprob_token_ids"
        srv.flavour = "refusing"  # from now on logprob_token_ids is unknown, and >20 logprobs refused as vLLM does
        original = srv.answer

        def refuse(chat, body):
            if "logprob_token_ids" in body:
                return 400, {"error": {"message": "Unrecognized request argument: logprob_token_ids"}}
            return original(chat, body)

        srv.answer = refuse
        resp = model.score(REQUEST)
        assert resp.strategy == "top-k"
        assert any("refused the logprob_token_ids read mid-run" in n for n in model.read_plan().notes)


def test_a_server_that_reports_its_template_is_read_through_completions_prefilled():
    """llama-server's /props names the chat template: when its chat endpoint cannot continue a turn,
    the prefilled completions path is preferred (the URI chose no endpoint)."""
    from tests.support.fault_server import FaultServer

    with FaultServer() as srv:
        srv.props = {"chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}...{% endfor %}"}
        model = load_backend(srv.url + "#judge")
        plan = model.read_plan()
        assert (plan.endpoint, plan.prefilled) == ("completions", True) and model.template == "chatml"
        model.score(REQUEST)
        assert srv.requests[-1]["path"].endswith("/v1/completions")
        assert srv.requests[-1]["body"]["prompt"].endswith("<|im_start|>assistant\nGrade:")
        pinned = load_backend(srv.url + "?endpoint=chat#judge")  # the URI's choice stands
        assert (pinned.read_plan().endpoint, pinned.read_plan().strategy) == ("chat", "first-token")
