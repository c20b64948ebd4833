"""One verdict on every path: the embedded model and a real llama_cpp.server of the same GGUF.

The server's pair verdicts used to be flatter than the embedded model's (mean P(clean) 0.49-0.52
against 0.42-0.71). The cause was τ, not the reads: τ was looked up by the cache fingerprint,
so the server got the uncalibrated default 0.1 while the embedded GGUF has its shipped 0.0065.
τ now belongs to the weights (``calibration_key``), shared by every exact prefilled path.

Ten real dev pairs (the shortest of ``shared/data/pairwise_dev.jsonl``), three criteria, both slot
orders (K = 2), every slot read through the embedded model and through the server's prefilled
``/v1/completions`` path, whose probe finds the wide logprobs read (exact). Per slot the label
distributions may differ by at most 0.01 in total variation and P(a wins) by at most 0.01. The
server's chat endpoint cannot continue a prefilled turn: its readings must say ``first-token``.

Model cost: 10 pairs x 3 criteria x 2 orders x 2 slots = 120 slot reads on each path (plus the
server's whitespace paths), about 2 minutes on 2 cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veriscale.engine.store import Store
from veriscale.models.uri import load_backend
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

pytestmark = [pytest.mark.server, pytest.mark.embedded]
REPO = Path(__file__).resolve().parents[2]
DEV_PAIRS = next(p for p in (Path("/work/shared/data/pairwise_dev.jsonl"),
                             REPO.parent / "shared" / "data" / "pairwise_dev.jsonl") if p.exists())
N_PAIRS = 10
MAX_TV = 0.01
MAX_DP = 0.01


def shortest_pairs(n: int) -> list[dict]:
    rows = [json.loads(line) for line in DEV_PAIRS.read_text("utf-8").splitlines() if line.strip()]
    rows.sort(key=lambda r: (len(r["instruction"]) + len(r["output_1"]) + len(r["output_2"]), r["id"]))
    return rows[:n]


def tv(p: dict[str, float], q: dict[str, float]) -> float:
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def verdicts(model, tmp_path: Path, name: str) -> list:
    crits = load_criteria("general")
    crits = crits.only([c.name for c in crits.items[:3]])
    v = Verifier(model, store=Store.open(tmp_path / f"{name}.sqlite3"), criteria=crits, repeats=2,
                 injection_detect=False)
    return [v.compare(r["instruction"], r["output_1"], r["output_2"]) for r in shortest_pairs(N_PAIRS)]


def by_slot(result) -> dict[tuple, object]:
    return {(r.criterion, r.repeat, r.candidate): r for r in result.readings}


def test_the_prefilled_server_path_gives_the_weights_distribution(embedded_model, llama_server, tmp_path):
    from veriscale.models.embedded_files import default_gguf_path

    # the URI names the GGUF the server serves, so the server's exact reads share the file's calibrated tau
    server = load_backend(f"{llama_server}?template=chatml&weights={default_gguf_path()}#smollm2")
    plan = server.read_plan()
    assert (plan.strategy, plan.prefilled, plan.method) == ("exact", True, "wide-logprobs"), plan
    here = verdicts(embedded_model, tmp_path, "embedded")
    there = verdicts(server, tmp_path, "server")
    worst_tv, worst_dp = 0.0, 0.0
    for a, b in zip(here, there):
        assert not a.failed and not b.failed, (a.errors, b.errors)
        ra, rb = by_slot(a), by_slot(b)
        assert ra.keys() == rb.keys() and len(ra) == 3 * 2 * 2
        for key, reading in ra.items():
            assert reading.strategy == "exact" and rb[key].strategy == "exact", (key, rb[key].strategy)
            worst_tv = max(worst_tv, tv(reading.label_probs, rb[key].label_probs))
        worst_dp = max(worst_dp, abs(a.p_a_wins - b.p_a_wins))
        assert b.to_dict()["read_strategies"] == ["exact"]
        assert b.tau == a.tau and not any("default tau" in n for n in b.notes)
    assert worst_tv <= MAX_TV, f"worst per-slot total variation {worst_tv:.4f}"
    assert worst_dp <= MAX_DP, f"worst |dP(a wins)| {worst_dp:.4f}"


def test_a_server_without_calibration_says_its_tau_is_the_default(llama_server, tmp_path):
    server = load_backend(llama_server + "?template=chatml#smollm2")
    result = Verifier(server, store=Store.open(tmp_path / "s.sqlite3"), scale="letters:5",
                      criteria=load_criteria("general").only(["Correctness"]), injection_detect=False
                      ).compare("What is 2 + 2?", "4", "5")
    assert result.tau == 0.1 and any("default tau 0.1" in n for n in result.notes)


def test_the_chat_path_says_it_reads_the_first_token(llama_server, tmp_path):
    server = load_backend(llama_server + "#smollm2")
    plan = server.read_plan()
    assert plan.strategy == "first-token" and not plan.prefilled
    (result,) = [Verifier(server, store=Store.open(tmp_path / "chat.sqlite3"),
                          criteria=load_criteria("general").only(["Correctness"]), injection_detect=False)
                 .compare("What is 2 + 2?", "4", "5")]
    assert {r.strategy for r in result.readings} == {"first-token"}
    assert any("first generated token" in n for n in result.notes)


def test_each_path_has_its_own_cache_key(llama_server):
    chat = load_backend(llama_server + "#smollm2")
    completions = load_backend(llama_server + "?template=chatml#smollm2")
    assert chat.fingerprint() != completions.fingerprint()
    assert "read=chat/" in chat.fingerprint() and "/first-token/" in chat.fingerprint()
    assert "read=completions/exact/prefilled/wide-logprobs/1000" in completions.fingerprint()
