"""``?sample=N``: the slot read by N draws of the grade at temperature 1, through a real
llama_cpp.server (its ``n`` gives one choice, so each draw is its own seeded request).

A relay in front of the server records every draw, so the test tells the product's part of a
reproducible read (the rerun sends the same requests, seeds and all; each reading is what its draws
wrote) from the server's (the same request draws the same text).

Model cost: 1 criterion x 2 slot orders x 2 slots x 16 draws = 64 three-token completions, plus the
same again from the cache-free rerun."""

from __future__ import annotations

import json
import warnings

import pytest

from tests.support.recording_relay import RecordingRelay
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.models.openai_replies import reply_draws
from veriscale.models.sampled_read import label_counts, sampled_distribution
from veriscale.models.uri import load_backend
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

pytestmark = pytest.mark.server
DRAWS = 16  # at T = 1 about a third of SmolLM2's draws write a label: 16 leave none empty


def compare(model, store, refresh=False):
    return Verifier(model, store=store, criteria=load_criteria("general").only(["Correctness"]), scale="letters:5",
                    injection_detect=False, refresh=refresh).compare("What is 2 + 2?", "4", "5")


def sampled_exchanges(relay: RecordingRelay) -> dict[str, list[dict]]:
    """The draws the relay saw, by the prompt they drew for (one read each), in the order sent."""
    reads: dict[str, list[dict]] = {}
    for ex in relay.exchanges:
        body = ex["body"] or {}
        if ex["method"] == "POST" and body.get("temperature") == 1.0 and "seed" in body:
            prompt = json.dumps(body.get("messages") or body.get("prompt"), sort_keys=True)
            reads.setdefault(prompt, []).append(ex)
    return reads


def drawn_texts(exchanges: list[dict]) -> list[str]:
    return [reply_draws(ex["reply"] or {})[0] for ex in exchanges]


def test_a_sampled_read_is_marked_counted_and_reproducible(llama_server, tmp_path):
    with RecordingRelay(llama_server) as relay:
        model = load_backend(f"{relay.url}?template=chatml&sample={DRAWS}#smollm2")
        assert model.read_plan().strategy == "sampled"
        store = Store.open(tmp_path / "s.sqlite3")
        relay.clear()
        first = compare(model, store)
        first_reads = sampled_exchanges(relay)
        relay.clear()
        again = compare(model, store, refresh=True)  # the cache left out: every draw asked again
        again_reads = sampled_exchanges(relay)
    assert any(r.value is not None for r in first.readings)
    for r in first.readings:
        if r.value is None:  # a weak model at T = 1 may write no label in any draw: a failed call, said so
            assert "no probability on any score label" in (r.error or "")
        else:
            assert (r.strategy, r.samples) == ("sampled", DRAWS)
            # the mass is the share of the DRAWS draws that wrote a label
            assert r.label_mass * DRAWS == pytest.approx(round(r.label_mass * DRAWS))
            assert sum(r.label_probs.values()) == pytest.approx(1.0)
            assert r.value_se is not None or round(r.label_mass * DRAWS) < 2
    d = json.loads(json.dumps(first.to_dict(), allow_nan=False))
    assert d["read_strategies"] == ["sampled"] and "reward_a_se" in d and "reward_b_se" in d
    assert first.usage.prompt_tokens > 0  # every draw's prompt is counted

    # llama_cpp.server answers one choice for n=16: each read is 16 requests, each with its own seed
    labels = tuple("ABCDE")
    assert len(first_reads) == len(first.readings)
    for draws in first_reads.values():
        assert len(draws) == DRAWS and len({ex["body"]["seed"] for ex in draws}) == DRAWS
    # each reading is exactly what its draws wrote
    from_draws = sorted(json.dumps(sampled_distribution(drawn_texts(ex), labels)[0] if
                                   label_counts(drawn_texts(ex), labels)[1] else {}, sort_keys=True)
                        for ex in first_reads.values())
    assert from_draws == sorted(json.dumps(r.label_probs, sort_keys=True) for r in first.readings)
    # a rerun sends the same requests, seeds and all: the product's part of reproducibility
    assert {p: [ex["body"] for ex in exs] for p, exs in again_reads.items()} == \
        {p: [ex["body"] for ex in exs] for p, exs in first_reads.items()}
    # the server's part: the same request drew the same text (llama_cpp.server does on one machine);
    # where it did not, the rerun's readings cannot match, and the warning names the draws
    changed = [(p[-60:], ex1["body"]["seed"], t1, t2) for p in first_reads
               for ex1, t1, t2 in zip(first_reads[p], drawn_texts(first_reads[p]), drawn_texts(again_reads[p]))
               if t1 != t2]
    if changed:
        warnings.warn(f"llama_cpp.server drew differently for {len(changed)} identical request(s): {changed}",
                      stacklevel=1)
    else:
        assert [r.label_probs for r in again.readings] == [r.label_probs for r in first.readings]


@pytest.mark.parametrize("query", ["sample=1", "sample=0", "sample=x"])
def test_too_few_or_no_draws_is_one_sentence(llama_server, query):
    with pytest.raises(UserError) as err:
        load_backend(f"{llama_server}?template=chatml&{query}#smollm2")
    assert "sample" in str(err.value) and "\n" not in str(err.value)


def test_the_embedded_model_cannot_sample_and_says_so():
    with pytest.raises(UserError, match="takes threads and context"):
        load_backend("embedded?sample=8")
