"""What a server says about itself reaches the HTTP backend: served ids (checked), its context,
its weights (in the fingerprint, and per reply), the endpoint asked for; clients are closed.

The servers here are real local HTTP servers (tests/support/fault_server.py) shaped like vLLM and
the C++ llama-server, which cannot run on this machine; the real llama_cpp.server is in
tests/integration/test_llama_server_context.py.
"""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from tests.support.fault_server import FaultServer
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.models.abilities import aclose_backend
from veriscale.models.base import Message, ScoreRequest
from veriscale.models.openai_compat import OpenAICompatModel
from veriscale.models.server_info import ServerProbe
from veriscale.models.uri import load_backend
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

REQ = ScoreRequest(messages=(Message("user", "grade it"),), prefill="Grade:", labels=("A", "B", "C"))


@pytest.fixture()
def server():
    with FaultServer() as srv:
        yield srv


def test_a_model_the_server_does_not_list_is_one_sentence_listing_the_served_ids(server):
    m = OpenAICompatModel(server.url, model="gpt-9", backoff_s=0.01)
    with pytest.raises(UserError) as err:
        m.score(REQ)
    text = str(err.value)
    assert "does not serve model 'gpt-9' (it serves fault-model, judge)" in text and "#fault-model" in text
    assert "\n" not in text and not any(r["path"].endswith("completions") for r in server.requests)


def test_the_model_check_has_an_async_form_and_asks_once(server):
    probe = ServerProbe(server.url, "judge")

    async def main() -> list[str]:
        async with httpx.AsyncClient() as client:
            return [i.model_id for i in await asyncio.gather(*(probe.ainfo(client) for _ in range(5)))]

    assert asyncio.run(main()) == ["judge"] * 5
    wrong = ServerProbe(server.url, "nope")

    async def bad() -> None:
        async with httpx.AsyncClient() as client:
            await wrong.ainfo(client)

    with pytest.raises(UserError, match="does not serve model 'nope'"):
        asyncio.run(bad())


def test_the_async_score_path_checks_the_model_through_the_async_client(server):
    m = OpenAICompatModel(server.url, model="nope", backoff_s=0.01)
    with pytest.raises(UserError, match="does not serve model 'nope'"):
        asyncio.run(m.ascore(REQ))


def test_the_endpoint_asked_for_is_the_endpoint_used(server):
    chat = OpenAICompatModel(server.url, model="fault-model", template="chatml", endpoint="chat")
    chat.score(REQ)
    assert server.requests[-1]["path"] == "/v1/chat/completions"
    completions = load_backend(f"{server.url}?template=chatml&endpoint=completions#fault-model")
    completions.score(REQ)
    assert server.requests[-1]["path"] == "/v1/completions"


def test_vllm_reports_its_context_and_weights(server):
    server.model_fields = {"max_model_len": 4096, "root": "/weights/qwen-v1"}
    m = OpenAICompatModel(server.url, model="fault-model")
    assert m.context_size() == 4096
    assert m.fingerprint().split(" read=")[0] == f"http:{server.url}#fault-model [root=/weights/qwen-v1]"


def test_llama_server_props_give_the_context_and_the_model_file(server):
    server.model_fields = {"meta": {"size": 270_000_000, "n_params": 135_000_000}}
    server.props = {"default_generation_settings": {"n_ctx": 2048}, "model_path": "/m/smollm2.gguf"}
    m = OpenAICompatModel(server.url, model="fault-model")
    assert m.context_size() == 2048
    assert m.fingerprint().split(" read=")[0].endswith("[model=/m/smollm2.gguf size=270000000 n_params=135000000]")


def test_a_context_option_is_used_when_the_server_does_not_say(server):
    assert load_backend(f"{server.url}?context=3000#fault-model").context_size() == 3000
    with pytest.raises(UserError, match="option context=lots in model URI"):
        load_backend(f"{server.url}?context=lots#fault-model")
    server.model_fields = {"max_model_len": 4096}
    assert load_backend(f"{server.url}?context=3000#fault-model").context_size() == 4096  # the server knows


def _compare(uri: str, store: Store):
    crits = load_criteria("general").only(["Correctness"])
    return Verifier(load_backend(uri), store=store, criteria=crits, scale="letters:5").compare("t", "x", "y")


def test_new_weights_under_the_same_name_are_noticed_and_old_verdicts_not_served(server, tmp_path, caplog):
    store = Store.open(tmp_path / "s.sqlite3")
    uri = f"{server.url}#fault-model"
    server.model_fields = {"root": "/weights/v1"}
    first = _compare(uri, store)
    assert not first.failed and first.usage.model_calls > 0
    assert _compare(uri, store).usage.model_calls == 0  # same weights: from the cache
    server.model_fields = {"root": "/weights/v2"}
    with caplog.at_level(logging.WARNING, logger="veriscale"):
        again = _compare(uri, store)
    assert again.usage.model_calls == first.usage.model_calls
    assert [r.message for r in caplog.records] == [
        f"the model {uri} now has other weights ([root=/weights/v1] -> [root=/weights/v2]): its verdicts cached "
        "for the old weights are not reused"]


def _weights_of(result, store: Store) -> set[str]:
    return {store.get_call(r.call_key)["system_fingerprint"] for r in result.readings}


def test_weights_named_only_in_replies_stop_older_cached_verdicts(server, tmp_path, caplog):
    store = Store.open(tmp_path / "s.sqlite3")
    uri = f"{server.url}#fault-model"
    server.system_fingerprint = "fp_1"
    first = _compare(uri, store)
    assert first.usage.model_calls > 0 and _weights_of(first, store) == {"fp_1"}
    assert _compare(uri, store).usage.model_calls == 0
    server.system_fingerprint = "fp_2"
    crits = load_criteria("general").only(["Correctness"])
    with caplog.at_level(logging.WARNING, logger="veriscale"):  # a new call meets the new weights
        fresh = Verifier(load_backend(uri), store=store, criteria=crits, scale="letters:5").compare("t", "x", "z")
    assert fresh.usage.model_calls == first.usage.model_calls
    assert any("system_fingerprint fp_1 -> fp_2" in r.message for r in caplog.records)
    again = _compare(uri, store)  # the fp_1 verdicts of the first pair are not served any more
    assert again.usage.model_calls == first.usage.model_calls and _weights_of(again, store) == {"fp_2"}


def test_close_and_aclose_close_the_http_clients(server):
    m = OpenAICompatModel(server.url, model="fault-model")
    m.score(REQ)

    async def use_then_close() -> httpx.AsyncClient:
        await m.ascore(REQ)
        client = m._async_client()
        await aclose_backend(m)
        return client

    client = asyncio.run(use_then_close())
    assert client.is_closed and m._client.is_closed


def test_close_from_another_thread_closes_a_client_whose_loop_still_runs(server):
    import threading

    m = OpenAICompatModel(server.url, model="fault-model")
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(m.ascore(REQ), loop).result(timeout=60)
        client = asyncio.run_coroutine_threadsafe(_client_of(m), loop).result(timeout=60)
        m.close()
        assert client.is_closed and m._client.is_closed
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        loop.close()


async def _client_of(m: OpenAICompatModel) -> httpx.AsyncClient:
    return m._async_client()
