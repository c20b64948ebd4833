"""Joint replies from a real ``python -m llama_cpp.server``: both logprob shapes, slot by slot."""

import pytest

from veriscale.engine.store import Store
from veriscale.models.base import Message, ScoreRequest
from veriscale.models.uri import load_backend
from veriscale.verify.reward import Verifier

pytestmark = pytest.mark.server
COPY = "Write exactly this text:\nName: A\nAge: B\nCity: C"


@pytest.mark.parametrize("suffix", ["?template=chatml#smollm2", "#smollm2"])  # legacy completions, chat
def test_a_real_joint_reply_is_read_at_each_header(llama_server, suffix):
    model = load_backend(llama_server + suffix)
    req = ScoreRequest(messages=(Message("user", COPY),), prefill="Name:", labels=tuple("ABCDE"),
                       joint=("\nAge:", "\nCity:"))
    resp = model.score(req)
    assert [s["problem"] for s in resp.slots] == [None, None, None]
    assert [s["written"] for s in resp.slots] == ["A", "B", "C"]
    for slot, label in zip(resp.slots, "ABC"):  # each slot's distribution is its own position's
        assert max(slot["label_probs"], key=slot["label_probs"].get) == label
        assert 0 < slot["label_mass"] <= 1 and slot["label_mass"] + slot["unseen_mass"] <= 1 + 1e-6
    assert resp.label_probs == resp.slots[0]["label_probs"]


def test_a_joint_verdict_on_the_server_re_asks_unreached_slots_and_counts_them(llama_server, tmp_path):
    model = load_backend(llama_server + "?template=chatml#smollm2")
    v = Verifier(model, store=Store.open(tmp_path / "s.sqlite3"), criteria="agent", scale="letters:5", joint=True)
    res = v.score("What is 12 * 12?", "144")
    assert not res.failed, res.errors
    asked_alone = sum("re-asked alone" in n for n in res.notes)
    assert res.usage.model_calls == 1 + asked_alone
    assert len(res.readings) == 3
