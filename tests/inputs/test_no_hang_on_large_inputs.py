"""Large inputs are planned in time linear in their size, or refused in one sentence: no hang.

``select --method round_robin --dry-run`` over 10,000 candidates (50 million pairs) is priced
without building the pairs; running it is refused with the option to change. A 50 MB one-line
candidate under ``score --dry-run`` is refused before the embedded tokenizer (quadratic on one
long word) sees it. Each command runs in a subprocess under a generous hang guard.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.inputs.cli import one_sentence, run_cli
from tests.support.fault_server import FaultServer

TASK = "Return the sum of a list of numbers."


@pytest.fixture(scope="module")
def server():
    with FaultServer() as srv:
        yield srv


def test_round_robin_over_10000_candidates_is_priced_without_building_the_pairs(server, tmp_path):
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": TASK},
                                                                    {"role": "assistant", "content": f"answer {i}"}]})
                            + "\n" for i in range(10_000)))
    model = ["--model", server.url + "#fault-model", "--store", str(tmp_path / "s.sqlite3")]
    dry = run_cli("select", str(pool), "--method", "round_robin", "--dry-run", "--json", *model)
    assert dry.returncode == 0, dry.stderr[-2000:]
    plan = json.loads(dry.stdout)
    assert plan["n_distinct"] == 10_000 and plan["comparisons_planned"] == 10_000 * 9_999 // 2
    assert plan["model_calls_upper_bound"] >= plan["model_calls_planned"] > 0
    assert any("more than the 500,000 it runs" in n and "--method ppt" in n for n in plan["notes"]), plan["notes"]
    sent = len(server.requests)
    one_sentence(run_cli("select", str(pool), "--method", "round_robin", *model), "49,995,000 comparisons",
                 "--method ppt")
    assert not [r for r in server.requests[sent:] if "completions" in r["path"]], "nothing was judged"
    ppt = run_cli("select", str(pool), "--dry-run", "--json", *model)
    assert ppt.returncode == 0 and json.loads(ppt.stdout)["notes"] == [], ppt.stderr[-2000:]


def test_a_50_mb_one_line_candidate_is_refused_before_the_tokenizer(tmp_path):
    big = tmp_path / "big.md"
    big.write_bytes(b"x" * (50 * 1000 * 1000))
    task = tmp_path / "task.md"
    task.write_text(TASK)
    err = one_sentence(run_cli("score", str(task), str(big), "--dry-run", timeout=300), "candidate", "50,000,000",
                       "context")
    assert re.search(r"'s [\d,]+-token context", err), err
