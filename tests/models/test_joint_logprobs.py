"""Reading a joint reply's slots from both logprob shapes (chat ``content[]`` and legacy completions)."""

import math

import pytest

from veriscale.models.logprobs import MalformedLogprobs, NoLogprobs, generated_positions, joint_slot_tops

LN = math.log


def chat_payload(tokens):
    return {"choices": [{"logprobs": {"content": [
        {"token": t, "logprob": LN(0.9), "top_logprobs": [{"token": t, "logprob": LN(0.9)},
                                                          {"token": " Z", "logprob": LN(0.05)}]} for t in tokens]}}]}


def legacy_payload(tokens):
    return {"choices": [{"text": "".join(tokens), "logprobs": {
        "tokens": tokens, "text_offset": list(range(len(tokens))), "token_logprobs": [LN(0.9)] * len(tokens),
        "top_logprobs": [{t: LN(0.9), " Z": LN(0.05)} for t in tokens]}}]}


@pytest.mark.parametrize("shape", [chat_payload, legacy_payload])
def test_each_slot_is_read_at_the_token_right_after_its_header(shape):
    generated = [" A", "\n", "Output", ":", " C", "\n", "Second", " response", "\n", "Output", ":", " B"]
    tops = joint_slot_tops(generated_positions(shape(generated)), ["First response\nOutput:", "\nOutput:",
                                                                   "\nSecond response\nOutput:"], first_at_start=True)
    assert [(w, p) for _, w, p in tops] == [("A", None), ("C", None), ("B", None)]
    assert tops[1][0][0] == (" C", pytest.approx(0.9))


def test_chat_replies_search_the_first_header_too_and_name_what_they_never_reached():
    generated = ["Spec", ":", " A", "\n", "Out", "put", ":", " D"]
    tops = joint_slot_tops(generated_positions(chat_payload(generated)), ["Spec:", "\nOutput:", "\nErrors:"],
                           first_at_start=False)
    assert [w for _, w, _ in tops] == ["A", "D", ""]
    assert tops[2][2] == "the joint reply never wrote its header"


def test_a_header_run_into_its_grade_or_left_at_the_end_is_unreadable():
    tops = joint_slot_tops(generated_positions(chat_payload([" A", "\nOutput:B"])), ["X:", "\nOutput:"],
                           first_at_start=True)
    assert "no token starts after it" in tops[1][2]
    tops = joint_slot_tops(generated_positions(chat_payload([" A", "\nOutput:"])), ["X:", "\nOutput:"],
                           first_at_start=True)
    assert tops[1][2] == "the joint reply ended at its header"


def test_replies_without_or_with_broken_logprobs():
    with pytest.raises(NoLogprobs):
        generated_positions({"choices": [{"text": "A"}]})
    with pytest.raises(MalformedLogprobs):
        generated_positions({"choices": [{"logprobs": {"tokens": ["A"], "top_logprobs": [{}, {}]}}]})


def test_a_bare_space_before_the_grade_is_read_through_on_both_paths():
    """Small models write " " and then the digit: the grade is P(digit at once) + P(" ")·P(digit after)."""
    payload = {"choices": [{"logprobs": {"content": [
        {"token": " ", "logprob": LN(0.6), "top_logprobs": [{"token": " ", "logprob": LN(0.6)},
                                                            {"token": "7", "logprob": LN(0.3)}]},
        {"token": "8", "logprob": LN(0.5), "top_logprobs": [{"token": "8", "logprob": LN(0.5)},
                                                            {"token": "7", "logprob": LN(0.5)}]}]}}]}
    (top, written, problem), = joint_slot_tops(generated_positions(payload), ["Grade:"], first_at_start=True)
    assert written == "8" and problem is None
    got = dict()
    for tok, p in top:
        got[tok] = got.get(tok, 0.0) + p
    assert got == {"7": pytest.approx(0.3 + 0.6 * 0.5), "8": pytest.approx(0.6 * 0.5)}


def test_the_joint_grammar_writes_every_later_header_as_a_literal():
    from veriscale.models.joint_grammar import joint_gbnf

    g = joint_gbnf(['Say "x":', '\nBack\\slash:'], ("1", "2"))
    assert g == 'root ::= " "? label "\\nBack\\\\slash:" " "? label\nlabel ::= "1" | "2"\n'
    assert joint_gbnf(['Say "x":'], ("1",), first_header=True).startswith('root ::= "Say \\"x\\":" " "? label')


def test_a_joint_reply_counts_its_cost_as_a_one_slot_reply_does():
    """Sent, processed and cached prompt tokens come from the server's usage the same way (they
    were read raw before: a cached prefix read as processed and the cache count was lost)."""
    import asyncio

    from veriscale.models.base import Message, ScoreRequest
    from veriscale.models.openai_compat import OpenAICompatModel
    from veriscale.models.read_strategy import ReadKind, ReadPlan

    tokens = [" ", "7", "\n", "B", ":", " ", "3"]
    payload = legacy_payload(tokens)
    payload["usage"] = {"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 60}}
    model = OpenAICompatModel("http://127.0.0.1:9/v1", model="m", template="chatml")
    request = ScoreRequest(messages=(Message("user", "grade it"),), prefill="A:", labels=("3", "7"), joint=("\nB:",))

    async def post(path, body):  # the server's reply, scripted
        assert path == "/completions" and body["max_tokens"] > 0
        return payload

    async def ident(_post):
        return "m"

    model._ident = ident
    model._plan = ReadPlan(ReadKind.TOP_K, True, "completions", "top-logprobs", 20, joint="grammar")  # no probe
    try:
        resp = asyncio.run(model._score_joint(request, post))
    finally:
        model.close()
    assert [s["written"] for s in resp.slots] == ["7", "3"]
    assert (resp.prompt_tokens_total, resp.cached_prompt_tokens, resp.prompt_tokens) == (100, 60, 40)
