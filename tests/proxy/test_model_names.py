"""Model names: ``[proxy.aliases]`` map names to candidate pools, ``/v1/models`` lists them, and an
unknown name is each API's not-found error, through the official SDKs against the real proxy.

Two FaultServer upstreams answer differently, so the reply says which pool answered; the
verifier is the scripted test double (one candidate per pool here: nothing is verified).
"""

from __future__ import annotations

from pathlib import Path

import anthropic
import openai
import pytest

from tests.proxy.conftest import chat_requests, fault_uri, proxied, scripted_verifier, settings_for
from tests.support.fault_server import FaultServer
from veriscale.config import load_config
from veriscale.errors import UserError
from veriscale.proxy.settings import parse_aliases, proxy_settings

HI = [{"role": "user", "content": "hi"}]


def test_aliases_choose_the_pool_and_are_listed_and_an_unknown_name_is_not_found(store_path: Path) -> None:
    with FaultServer(chat_reply="from A") as a, FaultServer(chat_reply="from B") as b:
        settings = settings_for((fault_uri(a), 1), aliases=(("fast", ((fault_uri(b), 1),)),))
        with proxied(store_path, settings, scripted_verifier()) as p:
            client = p.openai()
            assert [m.id for m in client.models.list()] == ["veriscale", "fast"]
            assert client.models.retrieve("fast").id == "fast"
            chat = client.chat.completions.create(model="fast", messages=HI)
            assert (chat.choices[0].message.content, chat.model) == ("from B", "fast")
            assert client.responses.create(model="veriscale", input="hi").output_text == "from A"
            msg = p.anthropic().messages.create(model="fast", max_tokens=8, messages=HI)
            assert msg.content[0].text == "from B"
            sent = len(chat_requests(a)) + len(chat_requests(b))
            with pytest.raises(openai.NotFoundError) as chat_missing:
                client.chat.completions.create(model="gpt-5", messages=HI, stream=True)
            with pytest.raises(openai.NotFoundError) as responses_missing:
                client.responses.create(model="gpt-5", input="hi")
            with pytest.raises(anthropic.NotFoundError) as messages_missing:
                p.anthropic().messages.create(model="claude-x", max_tokens=8, messages=HI)
            with pytest.raises(openai.NotFoundError):
                client.models.retrieve("gpt-5")
            assert len(chat_requests(a)) + len(chat_requests(b)) == sent  # nothing ran for an unknown name
    for exc in (chat_missing, responses_missing):
        assert (exc.value.code, exc.value.param, exc.value.type) == ("model_not_found", "model", "invalid_request_error")
        assert "the model 'gpt-5' does not exist on this proxy: use one of veriscale, fast" in exc.value.message
    assert messages_missing.value.body["error"]["type"] == "not_found_error"
    assert "'claude-x' does not exist" in messages_missing.value.body["error"]["message"]


def test_a_bare_proxy_answers_any_name_with_its_one_pool(store_path: Path) -> None:
    """No aliases: Codex and Claude Code may send their own model names."""
    with FaultServer(chat_reply="hello") as up, proxied(store_path, settings_for((fault_uri(up), 1)),
                                                         scripted_verifier()) as p:
        assert [m.id for m in p.openai().models.list()] == ["veriscale"]
        assert p.openai().chat.completions.create(model="gpt-5-codex", messages=HI).model == "gpt-5-codex"
        assert p.anthropic().messages.create(model="claude-sonnet-4", max_tokens=8, messages=HI).content[0].text == "hello"


def test_the_config_file_table_and_the_text_form_give_the_same_pools(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[proxy]\n[[proxy.candidates]]\nmodel = "http://127.0.0.1:9/v1#a"\nn = 3\n'
                      '[proxy.aliases]\nfast = "http://127.0.0.1:9/v1#b*2"\n'
                      'best = [{ model = "http://127.0.0.1:9/v1#a", n = 2 }, { model = "http://127.0.0.1:9/v1#b" }]\n'
                      'plain = "http://127.0.0.1:9/v1#b"\n')
    from_file = proxy_settings(load_config(config)).aliases
    assert from_file == (("fast", (("http://127.0.0.1:9/v1#b", 2),)),
                         ("best", (("http://127.0.0.1:9/v1#a", 2), ("http://127.0.0.1:9/v1#b", 3))),
                         ("plain", (("http://127.0.0.1:9/v1#b", 3),)))  # no n: as many as the default pool
    text = "fast=http://127.0.0.1:9/v1#b*2; best=http://127.0.0.1:9/v1#a*2, http://127.0.0.1:9/v1#b; " \
           "plain=http://127.0.0.1:9/v1#b"
    assert parse_aliases(text, "--proxy-aliases", 3) == from_file


@pytest.mark.parametrize("value, said", [
    ("fast", "'fast' is not an alias: write NAME=MODEL*N"),
    ("fast=qwen*0", "--proxy-aliases 'fast': 'qwen*0' is not a pool"),
    ({"fast": [{"model": "qwen", "n": 2, "extra": 1}]}, "--proxy-aliases 'fast' must be"),
    ({"fast": 3}, "--proxy-aliases 'fast' must be"),
])
def test_a_malformed_alias_is_one_sentence_naming_the_setting(value, said: str) -> None:
    with pytest.raises(UserError) as exc:
        parse_aliases(value, "--proxy-aliases", 2)
    assert said in str(exc.value)


def test_veriscale_serve_takes_aliases_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    from tests.support.scripted_model import registered_scheme
    from tests.support.serve_in_process import serve_while

    with FaultServer(chat_reply="from B") as b, \
            registered_scheme("scripted", lambda uri: scripted_verifier(), ("scripted",)):
        config = tmp_path / "config.toml"
        config.write_text(f'[proxy]\nprogress = false\n[[proxy.candidates]]\nmodel = "{fault_uri(b)}"\nn = 1\n')
        monkeypatch.setenv("VERISCALE_CONFIG", str(config))
        monkeypatch.setenv("VERISCALE_PROXY_ALIASES", f"fast={fault_uri(b)}*1")

        def ask(url: str) -> list[str]:
            client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)
            with pytest.raises(openai.NotFoundError):
                client.chat.completions.create(model="other", messages=HI)
            return [m.id for m in client.models.list()]

        names = serve_while(monkeypatch, [], ["--model", "scripted", "--store", str(tmp_path / "s.sqlite3")], ask)
    assert names == ["veriscale", "fast"]
