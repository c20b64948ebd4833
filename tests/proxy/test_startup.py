"""Setups that cannot work are refused at start, in one sentence: N = 0 (config file, --proxy-n,
settings), a verifier without logprobs or down; and the CLI says so in one line, exit 2.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.proxy.conftest import fault_uri, settings_for
from tests.support.fault_server import FaultServer
from veriscale.config import Config, load_config
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.models.uri import load_backend
from veriscale.proxy.settings import ProxySettings, proxy_settings
from veriscale.proxy.setup import open_proxy


def one_sentence(exc: pytest.ExceptionInfo[UserError]) -> str:
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text and not re.search(r"[.!?]\s+[A-Z]", text), text
    return text


def config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_the_proxy_table_is_read_and_checked(tmp_path: Path) -> None:
    cfg = load_config(config_file(tmp_path, """
[proxy]
verifier = "http://127.0.0.1:9/v1#judge"
k = 3
timeout_s = 30
progress = false

[[proxy.candidates]]
model = "http://127.0.0.1:8001/v1#qwen"
n = 3

[[proxy.candidates]]
model = "http://127.0.0.1:8002/v1#llama"
"""))
    settings = proxy_settings(cfg)
    assert settings.candidates == (("http://127.0.0.1:8001/v1#qwen", 3), ("http://127.0.0.1:8002/v1#llama", 1))
    assert settings.n_total == 4 and settings.verifier == "http://127.0.0.1:9/v1#judge"
    assert (settings.k, settings.timeout_s, settings.progress, settings.criteria) == (3, 30.0, False, "agent")
    assert proxy_settings(Config()) is None  # no [proxy] and no --proxy-n: no proxy
    fallback = proxy_settings(Config(), fallback_model="http://127.0.0.1:8000/v1#m", n=2)
    assert fallback.candidates == (("http://127.0.0.1:8000/v1#m", 2),)

    with pytest.raises(UserError) as unknown:
        proxy_settings(load_config(config_file(tmp_path, "[proxy]\nverifer = \"x\"\n")))
    assert "has no setting 'verifer'" in one_sentence(unknown)


def test_n_zero_is_refused_from_the_file_the_flag_and_the_settings(tmp_path: Path, store_path: Path) -> None:
    path = config_file(tmp_path, '[[proxy.candidates]]\nmodel = "http://127.0.0.1:8001/v1#qwen"\nn = 0\n')
    with pytest.raises(UserError) as from_file:
        proxy_settings(load_config(path))
    text = one_sentence(from_file)
    assert "n = 0" in text and "1 or more" in text and str(path) in text

    with pytest.raises(UserError) as from_flag:
        proxy_settings(Config(), fallback_model="embedded", n=0)
    assert "N >= 1" in one_sentence(from_flag) and "proxy_n=3" in str(from_flag.value)  # the CLI names the flag

    with pytest.raises(UserError) as from_settings:
        open_proxy(ProxySettings(candidates=()), None, Store.open(store_path))
    assert "at least one candidate" in one_sentence(from_settings)


def test_a_verifier_without_logprobs_is_refused_at_start(store_path: Path) -> None:
    with FaultServer() as judge, FaultServer(chat_reply="fine") as up:
        judge.queue("nologprobs")
        store = Store.open(store_path)
        with pytest.raises(UserError) as refused:
            open_proxy(settings_for((fault_uri(up), 2)), load_backend(f"{judge.url}#judge"), store)
        text = one_sentence(refused)
        assert "logprobs" in text and "failed its probe" in text and judge.url in text
        assert len(judge.requests) == 1 and judge.requests[0]["body"]["logprobs"] is True  # one probe, no more
        assert up.requests == []

        service = open_proxy(settings_for((fault_uri(up), 2)), load_backend(f"{judge.url}#judge"), store)
        assert service.verifier_model.uri == f"{judge.url}#judge"  # the same verifier, now with logprobs, passes


def test_a_verifier_that_is_down_is_refused_at_start(store_path: Path) -> None:
    judge = FaultServer()  # never started: its port is bound but nothing answers
    judge._httpd.server_close()
    with FaultServer() as up, pytest.raises(UserError) as refused:
        open_proxy(settings_for((fault_uri(up), 2)), load_backend(f"{judge.url}?retries=0#judge"), Store.open(store_path))
    assert judge.url in one_sentence(refused) and "cannot reach" in str(refused.value)


@pytest.mark.parametrize("how", ["flag", "file"])
def test_serve_with_n_zero_exits_2_with_one_line(how: str, tmp_path: Path) -> None:
    from veriscale.cli import app

    with FaultServer() as model:
        if how == "flag":
            path = config_file(tmp_path, "")
            extra = ["--proxy-n", "0"]
        else:
            path = config_file(tmp_path, f'[[proxy.candidates]]\nmodel = "{model.url}#m"\nn = 0\n')
            extra = []
        r = CliRunner().invoke(app, ["--config", str(path), "serve", "--store", str(tmp_path / "s.sqlite3"),
                                     "--model", f"{model.url}#fault-model", *extra])
        assert model.requests == []  # refused before the verifier probe: nothing was asked
    assert r.exit_code == 2, r.output
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in r.output, r.output
    assert ("N >= 1 candidates, not 0: pass --proxy-n 3" if how == "flag" else "n = 0") in lines[0], lines[0]


def test_candidates_named_by_a_models_table_of_the_config_file_are_its_endpoints(tmp_path: Path, store_path: Path) -> None:
    """``[[proxy.candidates]] model = "pool"`` with ``[models.pool]`` in the same (``--config``) file."""
    from tests.proxy.conftest import chat_requests, proxied

    with FaultServer() as judge, FaultServer(chat_reply="from the pool") as up:
        path = config_file(tmp_path, f"""
[models.pool]
endpoints = ["{fault_uri(up)}"]

[proxy]
progress = false

[[proxy.candidates]]
model = "pool"
n = 2
""")
        settings = proxy_settings(load_config(path))
        with proxied(store_path, settings, load_backend(f"{judge.url}#judge")) as p:
            assert p.service.pools.models == [fault_uri(up)] * 2
            reply = p.openai().chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "from the pool" and len(chat_requests(up)) == 2
