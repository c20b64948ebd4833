"""The equal-bias read against a recording double of a server that honours ``logit_bias`` and
reports post-bias logprobs (``ServerDouble("post-bias")``, a test double named as such), and one
that reports them before the bias, as llama.cpp does (``"pre-bias"``).

The double's labels sit below its top 20 tokens, so a plain top-20 read loses them; one bias on
every label token (and the bare whitespace a grade may follow) brings them all into view without
changing their ratios, and the reply read back to the unbiased scale gives the true distribution,
the newline path included."""

from __future__ import annotations

import math

import pytest

from tests.support.server_doubles import IDS, SLOT, TRUE_LABELS, ServerDouble
from veriscale.models.base import Message, ScoreRequest
from veriscale.models.read_probe import unbiased_top
from veriscale.models.read_strategy import EQUAL_BIAS
from veriscale.models.uri import load_backend

LABELS = tuple("ABCDE")
REQUEST = ScoreRequest(messages=(Message("user", "Grade the answer from A to E."),), prefill="Grade:", labels=LABELS)
#: what the read raises: each label alone and after a space, where one token, and the bare whitespace
RAISED = {IDS[t] for t in (*LABELS, *(" " + x for x in LABELS), " ", "\n") if t in IDS}


def truth() -> dict[str, float]:
    total = sum(TRUE_LABELS.values())
    return {lab: p / total for lab, p in TRUE_LABELS.items()}


@pytest.mark.parametrize("suffix", ["#judge", "?template=chatml#judge"])
def test_the_probe_picks_equal_bias_and_reads_the_true_label_distribution(suffix):
    with ServerDouble("post-bias") as srv:
        model = load_backend(srv.url + suffix)
        plan = model.read_plan()
        assert (plan.strategy, plan.method, plan.prefilled, plan.width) == ("exact", "equal-bias", True, 20)
        assert any("ignores logprob_token_ids" in n for n in plan.notes)
        resp = model.score(REQUEST)
        assert (resp.strategy, resp.prefilled, resp.unseen_mass) == ("exact", True, 0.0)
        for lab in LABELS:
            assert resp.label_probs[lab] == pytest.approx(truth()[lab], abs=1e-6)
        # the mass is read back to the unbiased scale: an upper bound (the non-labels past the top 20 are unseen)
        assert sum(TRUE_LABELS.values()) - 1e-9 <= resp.label_mass < 0.5
        path, body = srv.bodies[-2]  # the slot read, then its newline path
        assert {int(k) for k in body["logit_bias"]} == RAISED and set(body["logit_bias"].values()) == {EQUAL_BIAS}
        assert body["max_tokens"] == 1 and body["temperature"] == 0.0
        assert "\n" in (srv.bodies[-1][1].get("prompt") or srv.bodies[-1][1]["messages"][-1]["content"])
        assert srv.bodies[-1][1]["logit_bias"] == body["logit_bias"]
        if path.endswith("/chat/completions"):
            assert body["top_logprobs"] == 20 and body["continue_final_message"] is True
        else:
            assert body["logprobs"] == 20 and body["prompt"].endswith("<|im_start|>assistant\nGrade:")


def test_plain_top_k_on_the_same_double_misses_labels_and_has_another_cache_key():
    with ServerDouble("post-bias") as srv:
        exact = load_backend(srv.url + "#judge")
        top_k = load_backend(srv.url + "?read=top-k#judge")
        resp = top_k.score(REQUEST)
        assert resp.strategy == "top-k" and resp.unseen_mass > 0.3
        assert any(resp.label_probs[lab] == 0 for lab in LABELS)  # labels below the cut are lost
        assert 0.5 * sum(abs(resp.label_probs[k] - truth()[k]) for k in LABELS) > 0.1
        assert exact.read_plan().key() == "chat/exact/prefilled/equal-bias/20/bias=30"
        assert exact.read_plan().key() != top_k.read_plan().key()
        assert exact.fingerprint() != top_k.fingerprint()
        assert "logit_bias +30 on every label token" in exact.read_plan().describe()


def test_a_server_that_reports_logprobs_before_the_bias_is_not_read_by_it():
    with ServerDouble("pre-bias") as srv:
        plan = load_backend(srv.url + "#judge").read_plan()
        assert (plan.strategy, plan.method) == ("top-k", "top-logprobs")
        assert any("reports logprobs before the bias" in n for n in plan.notes)


def test_a_server_without_a_tokenizer_skips_it_with_a_note():
    with ServerDouble("sglang") as srv:  # no /tokenize; its wide read is exact, so ask for the bias alone
        from veriscale.models.base import drive_sync
        from veriscale.models.read_probe import probe_equal_bias

        model = load_backend(srv.url + "?template=chatml#judge")
        ok, notes = drive_sync(probe_equal_bias(model, model._sync_post))
        assert not ok and any("no tokenizer endpoint" in n for n in notes)


def test_a_server_that_refuses_logit_bias_midrun_falls_back_with_one_note():
    with ServerDouble("post-bias") as srv:
        model = load_backend(srv.url + "#judge")
        assert model.read_plan().method == "equal-bias"
        original = srv.answer

        def refuse(chat, body):
            if "logit_bias" in body:
                return 400, {"error": {"message": "logit_bias is not supported"}}
            return original(chat, body)

        srv.answer = refuse
        before = len(srv.bodies)
        first, second = model.score(REQUEST), model.score(REQUEST)
        assert (first.strategy, second.strategy) == ("top-k", "top-k")
        notes = [n for n in model.read_plan().notes if "refused the equal-bias read mid-run" in n]
        assert len(notes) == 1
        assert model.read_plan().method == "top-logprobs"
        # one refused request, then plain ones: the refusal is not asked again
        assert ["logit_bias" in b for _, b in srv.bodies[before:]] == [True, False, False]


def test_unbiased_top_undoes_the_shift_and_keeps_the_ratios():
    true = {"A": 0.01, " B": 0.03, "x": 0.5, "y": 0.46}
    z = sum(p * (math.exp(EQUAL_BIAS) if t in ("A", " B") else 1) for t, p in true.items())
    shown = [(t, p * (math.exp(EQUAL_BIAS) if t in ("A", " B") else 1) / z) for t, p in true.items()]
    back = dict(unbiased_top(shown, {"A", " B"}))
    for t, p in true.items():
        assert back[t] == pytest.approx(p, rel=1e-9)
    assert SLOT["A"] < SLOT[" w0"]  # the double's labels do sit below its fillers
