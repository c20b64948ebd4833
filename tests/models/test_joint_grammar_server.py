"""A joint reply through the real llama.cpp server: a GBNF grammar holds it to its format.

The read probe finds that llama.cpp takes ``grammar`` (``?grammar=on`` says so without asking).
Without a prefill (the chat endpoint) and without the grammar (``?grammar=off``) the 135M model
writes its own headers ("Instructions following", grades of 10) and no slot can be read; with the
grammar every slot is reached, on both endpoints, and each written grade is a score label."""

from __future__ import annotations

import pytest

from tests.support.llama_server import MODEL_ID
from veriscale.models.uri import load_backend
from veriscale.verify.criteria import load_criteria
from veriscale.verify.joint_prompts import joint_pairwise_request
from veriscale.verify.scale import digits

pytestmark = pytest.mark.embedded


@pytest.fixture(scope="module")
def request_():
    return joint_pairwise_request("Write a function that returns the sum of a list.", "def f(x): return sum(x)",
                                  "def f(x): return max(x)", load_criteria("general").items, "", digits(9))


def _readable(url: str, query: str, request_) -> list[bool]:
    model = load_backend(f"{url}{query}#{MODEL_ID}")
    try:
        slots = model.score(request_).slots
    finally:
        model.close()
    assert len(slots) == 6
    return [s["problem"] is None and s["label_mass"] > 0 and s["written"] in request_.labels for s in slots]


@pytest.mark.parametrize("query", ["?grammar=on", "?template=chatml&grammar=on", "", "?template=chatml"])
def test_the_grammar_reaches_every_slot(llama_server, request_, query: str) -> None:
    assert all(_readable(llama_server, query, request_))


def test_without_it_the_chat_reply_goes_off_format(llama_server, request_) -> None:
    assert not all(_readable(llama_server, "?grammar=off", request_))  # what the grammar is for (fails once 135M complies)


def test_the_grammar_keeps_its_verdicts_apart(llama_server) -> None:
    plain, held = (load_backend(f"{llama_server}{q}#{MODEL_ID}") for q in ("?grammar=off", ""))
    try:
        assert held.read_plan().joint == "grammar"  # found by the probe: llama.cpp holds a reply to a GBNF
        assert held.fingerprint() == plain.fingerprint() + "/joint=grammar"
        assert not plain.supports_joint() and held.supports_joint()
    finally:
        plain.close(), held.close()


def test_a_bad_grammar_option_is_one_sentence() -> None:
    from veriscale.errors import UserError

    with pytest.raises(UserError, match="option grammar=maybe in model URI .* is not on or off"):
        load_backend("http://127.0.0.1:9/v1?grammar=maybe#m")
