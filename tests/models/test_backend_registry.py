"""Model URIs resolve through one registry of schemes; a new backend is one register_backend call."""

from __future__ import annotations

import pytest

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.errors import UserError
from veriscale.models.openai_compat import OpenAICompatModel
from veriscale.models.registry import SCHEMES, register_backend, scheme_of
from veriscale.models.twostage import TwoStageModel
from veriscale.models.uri import URI_FORMS, load_backend


@pytest.fixture()
def registry():
    saved = dict(SCHEMES)
    yield SCHEMES
    SCHEMES.clear()
    SCHEMES.update(saved)


def test_built_in_forms_are_listed_in_order():
    assert URI_FORMS == ("embedded, embedded:<file.gguf>, http://host:port/v1#model, openai:<model>, "
                         "twostage:<reasoner>+<scorer>, anthropic:<model>")
    assert {"embedded", "http", "https", "openai", "twostage", "anthropic"} <= set(SCHEMES)


@pytest.mark.parametrize("uri,scheme", [
    ("embedded", "embedded"), ("embedded:/m/q.gguf", "embedded"), ("http://h:1/v1#m", "http"),
    ("https://h/v1", "https"), ("openai:gpt-4.1", "openai"), ("twostage:a+b", "twostage"), ("gpt-9", "gpt-9"),
])
def test_the_scheme_is_the_text_before_the_first_colon(uri, scheme):
    assert scheme_of(uri) == scheme


def test_a_registered_scheme_loads_and_is_listed_in_errors(registry):
    seen = []

    def parse(uri: str) -> ScriptedScoreModel:
        seen.append(uri)
        return ScriptedScoreModel(mass=float(uri.split(":", 1)[1]))

    register_backend(("scripted",), parse, forms=("scripted:<mass>",))
    model = load_backend("  scripted:0.5 ")
    assert isinstance(model, ScriptedScoreModel) and model.mass == 0.5 and seen == ["scripted:0.5"]
    with pytest.raises(UserError, match=r"unknown model URI 'gpt-9': use one of embedded, .*twostage:<reasoner>\+<scorer>, anthropic:<model>, scripted:<mass>"):
        load_backend("gpt-9")


def test_two_stage_splits_at_any_registered_scheme(registry):
    register_backend(("scripted",), lambda uri: ScriptedScoreModel(), forms=("scripted",))
    model = load_backend("twostage:http://127.0.0.1:9/v1#my+reasoner+scripted")  # a + not before a scheme stays
    assert isinstance(model, TwoStageModel) and isinstance(model.scorer, ScriptedScoreModel)
    assert isinstance(model.reasoner, OpenAICompatModel) and model.reasoner.requested_model == "my+reasoner"
    assert model.uri == "twostage:http://127.0.0.1:9/v1#my+reasoner+scripted"


def test_http_uri_options_reach_the_backend():
    model = load_backend("http://127.0.0.1:9/v1?template=chatml&top_logprobs=5&retries=1#Qwen/Qwen3-8B")
    assert isinstance(model, OpenAICompatModel)
    assert (model.base_url, model.requested_model, model.template, model.top_logprobs, model.max_retries) == (
        "http://127.0.0.1:9/v1", "Qwen/Qwen3-8B", "chatml", 5, 1)
    assert model.uri == "http://127.0.0.1:9/v1?template=chatml&top_logprobs=5&retries=1#Qwen/Qwen3-8B"


@pytest.mark.parametrize("uri,needle", [
    ("", "unknown model URI ''"),
    ("gpt-9", "unknown model URI 'gpt-9'"),
    ("http:localhost", "names no server"),
    ("http://h/v1?timeout=soon#m", "option timeout=soon in model URI"),
    ("twostage:embedded", "needs a reasoner and a scorer"),
    ("embedded:/no/such/model.gguf", "does not exist"),
])
def test_bad_uris_say_what_to_write(uri, needle):
    with pytest.raises(UserError, match=needle):
        load_backend(uri)


def test_openai_scheme_needs_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match="export OPENAI_API_KEY"):
        load_backend("openai:gpt-4.1-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    model = load_backend("openai:gpt-4.1-mini")
    assert model.base_url == "http://127.0.0.1:9/v1" and model.requested_model == "gpt-4.1-mini"
