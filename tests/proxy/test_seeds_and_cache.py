"""Candidate seeds and the cache, through the official SDKs against the real proxy.

A sampled request (temperature > 0) without a client seed samples fresh candidates every time
(a retry, "regenerate", the same messages through another API); under a client seed the seeds
derive from it and a repeat comes back from the cache with the same pick. The upstream is a
FaultServer whose reply depends on the candidate's seed; the verifier is the scripted double.
"""

from __future__ import annotations

from pathlib import Path

from tests.proxy.conftest import chat_requests, fault_uri, proxied, scripted_verifier, settings_for
from tests.support.fault_server import FaultServer
from veriscale.proxy.fan_out import candidate_seed

HI = [{"role": "user", "content": "Say something."}]


def by_seed(body) -> str:
    return "GOOD answer" if body["seed"] % 2 else "plain answer"  # candidates differ: the pick runs


def seeds(up) -> list[int]:
    return [r["body"]["seed"] for r in chat_requests(up)]


def test_without_a_client_seed_each_sampled_request_gets_fresh_candidates(store_path: Path) -> None:
    with FaultServer(chat_reply="same") as up, \
            proxied(store_path, settings_for((fault_uri(up), 2), temperature=0.8), scripted_verifier()) as p:
        p.openai().chat.completions.create(model="m", messages=HI)
        p.openai().chat.completions.create(model="m", messages=HI)  # a retry / "regenerate"
        p.anthropic().messages.create(model="c", max_tokens=16, messages=HI)  # the same messages, another API
        assert len(chat_requests(up)) == 6 and len(set(seeds(up))) == 6  # none came from the cache
        assert p.store.run(p.last_run("proxy anthropic").id).result["how"] == "agreed"


def test_under_a_client_seed_a_repeat_comes_from_the_cache_with_the_same_pick(store_path: Path) -> None:
    with FaultServer(chat_reply=by_seed) as up, \
            proxied(store_path, settings_for((fault_uri(up), 2), temperature=0.8), scripted_verifier()) as p:
        first = p.openai().chat.completions.with_raw_response.create(model="m", messages=HI, seed=42)
        again = p.openai().chat.completions.with_raw_response.create(model="m", messages=HI, seed=42)
        assert sorted(seeds(up)) == [candidate_seed(42, 0, 0.8), candidate_seed(42, 1, 0.8)]  # the repeat sent nothing
        assert first.headers["x-veriscale-pick"] == again.headers["x-veriscale-pick"] == "verified"
        assert first.parse().choices[0].message.content == again.parse().choices[0].message.content == "GOOD answer"
        p.openai().chat.completions.create(model="m", messages=HI, seed=43)  # another seed: other samples
        assert len(chat_requests(up)) == 4 and sorted(seeds(up)[2:]) == [candidate_seed(43, 0, 0.8),
                                                                  candidate_seed(43, 1, 0.8)]


def test_at_temperature_zero_a_repeat_is_cached_without_a_seed(store_path: Path) -> None:
    with FaultServer(chat_reply="same") as up, \
            proxied(store_path, settings_for((fault_uri(up), 2), temperature=0.8), scripted_verifier()) as p:
        for _ in range(2):
            p.openai().chat.completions.create(model="m", messages=HI, temperature=0)
        assert sorted(seeds(up)) == [0, 1]  # greedy: the second request came from the cache
