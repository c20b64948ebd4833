"""The HTTP backend against a real ``python -m llama_cpp.server`` on 127.0.0.1."""

import pytest

from veriscale.engine.store import Store
from veriscale.models.uri import load_backend
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

pytestmark = pytest.mark.server
TASK = "What is 12 * 12? Answer with the number."


@pytest.mark.parametrize("suffix", ["#smollm2", "?template=chatml#smollm2"])
def test_compare_through_chat_and_completions_endpoints(llama_server, suffix, tmp_path):
    model = load_backend(llama_server + suffix)
    store = Store.open(tmp_path / "s.sqlite3")
    crits = load_criteria("general").only(["Correctness"])
    res = Verifier(model, store=store, criteria=crits, scale="letters:5").compare(TASK, "144", "124")
    assert not res.failed, res.errors
    c = res.criteria["Correctness"]
    assert sum(c["label_probs"]["a"].values()) == pytest.approx(1.0)
    for r in res.readings:
        assert 0 <= r.label_mass <= 1 and 0 <= r.unseen_mass <= 1
        assert r.label_mass + r.unseen_mass <= 1 + 1e-6
    again = Verifier(model, store=store, criteria=crits, scale="letters:5").compare(TASK, "144", "124")
    assert again.usage.model_calls == 0


def test_fingerprint_and_label_check_through_the_server(llama_server):
    model = load_backend(llama_server + "#smollm2")
    assert model.fingerprint().startswith(f"http:{llama_server}#smollm2 read=chat/")  # the read path is part of it
    assert model.single_token_labels(tuple("ABCDE")) == []


def test_the_equal_bias_read_is_refused_because_the_server_reports_pre_bias_logprobs(llama_server):
    """llama_cpp.server applies logit_bias to what it picks but reports logprobs from before it, so one
    bias on every label cannot bring unseen labels into view: the probe's question says so (one plain
    and one biased request at the prefilled completions slot)."""
    from veriscale.models.base import drive_sync
    from veriscale.models.read_probe import probe_equal_bias

    model = load_backend(llama_server + "?template=chatml#smollm2")
    ok, notes = drive_sync(probe_equal_bias(model, model._sync_post))
    assert not ok
    assert any("reports logprobs before the bias" in n for n in notes), notes
