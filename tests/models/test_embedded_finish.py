"""The embedded model's chat says why a reply ended, as a server's ``finish_reason`` does: "length"
when ``max_tokens`` ran out (the proxy reports that reply truncated), "stop" at the end of the turn
or a stop sequence, on the plain and the grammar-constrained path alike."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.embedded

ASK = [{"role": "user", "content": "Write a long story about a dragon who learns to bake bread."}]


def test_a_reply_cut_at_max_tokens_ends_with_length(embedded_model):
    reply = embedded_model.chat(ASK, max_tokens=3)
    assert reply.completion_tokens == 3 and reply.finish_reason == "length"


def test_a_reply_ended_by_a_stop_sequence_ends_with_stop(embedded_model):
    reply = embedded_model.chat(ASK, max_tokens=200, options={"stop": [" "]})
    assert reply.completion_tokens < 200 and " " not in reply.content and reply.finish_reason == "stop"


def test_the_grammar_path_says_length_when_cut_and_stop_when_the_grammar_ends(embedded_model):
    cut = embedded_model.chat(ASK, max_tokens=2, options={"grammar": 'root ::= "dragon dragon dragon dragon"'})
    assert cut.completion_tokens == 2 and cut.finish_reason == "length"
    whole = embedded_model.chat(ASK, max_tokens=50, options={"grammar": 'root ::= "yes" | "no"'})
    assert whole.content in ("yes", "no") and whole.finish_reason == "stop"
