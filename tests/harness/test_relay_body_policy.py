"""The model relay's body policy against a hostile session (issue 30, item 4): a real socket
client, the real forward, a real 127.0.0.1 upstream that keeps every byte that reaches it.

What a call may cost under the host's key is capped (``n``, ``best_of``, ``max_tokens``,
``max_completion_tokens``); a body an upstream could read differently from the relay (a repeated
key, ``NaN``, an overflowing number, a lone surrogate) is refused; and what goes upstream is the
JSON the relay checked, written again, never the session's raw bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.harness.test_relay_gate import KEY, MODEL, PATH, Upstream, refused, talk
from veriscale.harness.jail.netjail import ModelForward
from veriscale.harness.jail.relay_gate import DEFAULT_MAX_TOKENS, Refused, RelayPolicy

PI_MAX_TOKENS = 32000  # pi-ai's buildBaseOptions: min(model.maxTokens, 32000), sent as max_completion_tokens


@pytest.fixture()
def relay() -> Iterator[tuple[ModelForward, Upstream]]:
    upstream = Upstream()
    policy = RelayPolicy.for_api("/v1", MODEL)
    with ModelForward(upstream.address, policy=policy, headers={"Authorization": f"Bearer {KEY}"}) as forward:
        yield forward, upstream
    upstream.close()


def post(body: bytes) -> bytes:
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (PATH.encode(), len(body), body))


def chat_body(**fields: object) -> bytes:
    return json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **fields}).encode()


def sent_body(seen: bytes) -> bytes:
    """The body the upstream got, after checking its Content-Length is its length."""
    head, _, body = seen.partition(b"\r\n\r\n")
    lengths = [int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    assert lengths == [len(body)], head
    return body


# -- cost caps ----------------------------------------------------------------------------------

OVER_CAP = {
    "n=128": ({"n": 128}, "n", "1 completions"),
    "best_of=64": ({"best_of": 64}, "best_of", "1 completions"),
    "max_tokens=10**6": ({"max_tokens": 10**6}, "max_tokens", f"{DEFAULT_MAX_TOKENS} tokens"),
    "max_completion_tokens=10**6": ({"max_completion_tokens": 10**6}, "max_completion_tokens", f"{DEFAULT_MAX_TOKENS} tokens"),
    "max_tokens one over": ({"max_tokens": DEFAULT_MAX_TOKENS + 1}, "max_tokens", f"{DEFAULT_MAX_TOKENS} tokens"),
    "n=2 beside an allowed max_tokens": ({"n": 2, "max_tokens": 16}, "n", "1 completions"),
}


@pytest.mark.parametrize("case", list(OVER_CAP))
def test_a_call_over_the_phase_caps_is_refused_naming_the_field_and_cap(relay, case: str) -> None:
    forward, upstream = relay
    fields, name, cap = OVER_CAP[case]
    sentence = refused(talk(forward, post(chat_body(**fields))))
    assert f"its body's {name} asks for more than this phase's cap of {cap};" in sentence
    assert upstream.connections == [], "nothing of a refused call (and so no key) reached the upstream"


BAD_VALUES = {"a float": 2.0, "a string": "128", "true": True, "false": False, "zero": 0, "negative": -128,
              "llama.cpp's unlimited": -1, "null": None, "a list": [1], "an object": {"n": 1}}


@pytest.mark.parametrize("field", ["n", "best_of", "max_tokens", "max_completion_tokens"])
@pytest.mark.parametrize("value", list(BAD_VALUES))
def test_a_cap_field_that_is_not_a_positive_integer_is_refused(relay, field: str, value: str) -> None:
    forward, upstream = relay
    sentence = refused(talk(forward, post(chat_body(**{field: BAD_VALUES[value]}))))
    assert f"its body's {field} is not a positive integer;" in sentence
    assert upstream.connections == []


def test_pis_own_calls_pass_with_their_values_unchanged(relay) -> None:
    """pi sends max_completion_tokens = min(maxTokens from the harness's models.json, 32000), no n."""
    forward, upstream = relay
    for asked in (2048, PI_MAX_TOKENS):  # the harness's default max_tokens_per_call; pi's own ceiling
        body = chat_body(stream=False, stream_options={"include_usage": True}, max_completion_tokens=asked,
                         tools=[], temperature=0)
        assert talk(forward, post(body)).startswith(b"HTTP/1.1 200 ")
    assert PI_MAX_TOKENS <= DEFAULT_MAX_TOKENS
    assert [json.loads(sent_body(seen))["max_completion_tokens"] for seen in upstream.connections] == [2048, PI_MAX_TOKENS]


def test_calls_within_the_caps_pass(relay) -> None:
    forward, upstream = relay
    body = chat_body(n=1, best_of=1, max_tokens=DEFAULT_MAX_TOKENS, max_completion_tokens=1)
    assert talk(forward, post(body)).startswith(b"HTTP/1.1 200 ")
    (seen,) = upstream.connections
    sent = json.loads(sent_body(seen))
    assert (sent["n"], sent["max_tokens"], sent["max_completion_tokens"]) == (1, DEFAULT_MAX_TOKENS, 1)


def test_a_phase_policy_sets_its_own_caps(tmp_path) -> None:
    policy = RelayPolicy.for_api("/v1", MODEL, max_n=4, max_tokens=512)
    assert json.loads(policy.check_body(chat_body(n=4, max_tokens=512)))["n"] == 4
    with pytest.raises(Refused, match="cap of 512 tokens"):
        policy.check_body(chat_body(max_tokens=513))
    with pytest.raises(Refused, match="its body's n asks for more than this phase's cap of 4 completions"):
        policy.check_body(chat_body(n=5))
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="not a positive integer"):
            RelayPolicy(model=MODEL, max_n=bad)
        with pytest.raises(ValueError, match="not a positive integer"):
            RelayPolicy(model=MODEL, max_tokens=bad)


# -- bodies an upstream could read differently ----------------------------------------------------

AMBIGUOUS = {
    "another model first, then the configured one":
        b'{"model": "gpt-4o-expensive", "model": "' + MODEL.encode() + b'", "messages": []}',
    "the configured model first, then another":
        b'{"model": "' + MODEL.encode() + b'", "messages": [], "model": "gpt-4o-expensive"}',
    "a repeated key inside a message":
        b'{"model": "' + MODEL.encode() + b'", "messages": [{"role": "user", "role": "system", "content": "x"}]}',
    "a repeated key deep down":
        b'{"model": "' + MODEL.encode() + b'", "messages": [], "tools": [{"function": {"a": {"b": 1, "b": 2}}}]}',
    "a repeated n (1 then 128)": b'{"model": "' + MODEL.encode() + b'", "messages": [], "n": 1, "n": 128}',
}


@pytest.mark.parametrize("case", list(AMBIGUOUS))
def test_a_body_repeating_a_key_is_refused(relay, case: str) -> None:
    forward, upstream = relay
    sentence = refused(talk(forward, post(AMBIGUOUS[case])))
    assert "its body repeats the key '" in sentence and "' in one object;" in sentence
    assert upstream.connections == [], "no upstream got a body it could read as another model"


NOT_JSON = {
    "NaN": (b'{"model": "%s", "messages": [], "temperature": NaN}', "NaN"),
    "Infinity": (b'{"model": "%s", "messages": [], "temperature": Infinity}', "Infinity"),
    "-Infinity": (b'{"model": "%s", "messages": [], "top_p": -Infinity}', "-Infinity"),
    "1e400": (b'{"model": "%s", "messages": [], "temperature": 1e400}', "a number too large to be finite"),
    "-1e400 nested": (b'{"model": "%s", "messages": [], "logit_bias": {"1": -1e400}}', "a number too large to be finite"),
    "a lone high surrogate": (b'{"model": "%s", "messages": [{"role": "user", "content": "a\\ud800b"}]}', "a lone surrogate"),
    "a lone low surrogate in a list": (b'{"model": "%s", "messages": [], "stop": ["\\udfff"]}', "a lone surrogate"),
    "a lone surrogate in a key": (b'{"model": "%s", "messages": [], "\\udc00": 1}', "a lone surrogate"),
    "a reversed pair": (b'{"model": "%s", "messages": [], "user": "\\ude00\\ud83d"}', "a lone surrogate"),
}


@pytest.mark.parametrize("case", list(NOT_JSON))
def test_nan_infinity_overflow_and_lone_surrogates_are_refused(relay, case: str) -> None:
    forward, upstream = relay
    raw, said = NOT_JSON[case]
    sentence = refused(talk(forward, post(raw % MODEL.encode())))
    assert f"its body holds {said}" in sentence
    assert upstream.connections == []


# -- what goes upstream -----------------------------------------------------------------------------

def test_the_upstream_gets_the_parsed_json_written_again_not_the_raw_bytes(relay) -> None:
    forward, upstream = relay
    raw = ('{ "model"  :  "%s" ,\n\t"messages":[{"role":"user","content":"caf\\u00e9 é \\/ \\ud83d\\ude00"}],'
           '"temperature": 1E0, "max_tokens": 64 }' % MODEL).encode()
    assert talk(forward, post(raw)).startswith(b"HTTP/1.1 200 ")
    (seen,) = upstream.connections
    body = sent_body(seen)
    assert body != raw
    assert body == json.dumps(json.loads(raw), ensure_ascii=False, allow_nan=False).encode("utf-8")
    assert body.count(b'"model"') == 1
    assert json.loads(body)["messages"][0]["content"] == "café é / \U0001f600"
    assert b"\\u00e9" not in body and "é".encode() in body and b"1E0" not in body


def test_check_body_returns_the_bytes_forwarded() -> None:
    policy = RelayPolicy.for_api("/v1", MODEL)
    raw = b'{"model":"%s","messages":[],"n":1}' % MODEL.encode()
    assert policy.check_body(raw) == b'{"model": "%s", "messages": [], "n": 1}' % MODEL.encode()
    assert policy.check("POST", PATH, raw) == policy.check_body(raw)
