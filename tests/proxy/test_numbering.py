"""One numbering for a proxied request's candidates: each is its place among the N asked for, a
failed one keeping its number, in the run's record (``candidates``, ``winner``, ``index``, the
ranking and the tournament), in the REST selection the dashboard draws and in the reply's pick.

Three upstreams through the official openai SDK: candidate 0 is a closed port (it fails), 1 and 2
are FaultServers that answer differently. The verifier is the scripted test double (it grades by
the marker GOOD, which candidate 2 writes), under both pick schedules.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from tests.proxy.conftest import fault_uri, proxied, scripted_verifier, settings_for
from tests.support.fault_server import FaultServer


def closed_port_uri() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1?retries=0#gone"  # nothing listens there any more


@pytest.mark.parametrize("schedule", ["round_robin", "early"])
def test_a_failed_candidate_keeps_its_number_everywhere(store_path: Path, schedule: str) -> None:
    with FaultServer(chat_reply="Push it now.") as bad, FaultServer(chat_reply="GOOD: run the tests first.") as good:
        settings = settings_for((closed_port_uri(), 1), (fault_uri(bad), 1), (fault_uri(good), 1), schedule=schedule)
        with proxied(store_path, settings, scripted_verifier()) as p:
            raw = p.openai().chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": "Next step?"}])
            run_id = int(raw.headers["x-veriscale-run"])
            result = p.run(run_id).result
            shown = httpx.get(f"{p.url}/api/runs/{run_id}/selection").json()
    assert raw.headers["x-veriscale-pick"] == "verified" and result["schedule"] == schedule
    assert raw.parse().choices[0].message.content == "GOOD: run the tests first."
    assert [(c["index"], c["reply"] is None) for c in result["candidates"]] == [(0, True), (1, False), (2, False)]
    assert result["winner"] == result["index"] == 2 and result["best"]["id"] == "candidate-2"
    assert sorted((r["index"], r["id"]) for r in result["ranking"]) == [(1, "candidate-1"), (2, "candidate-2")]
    pairs = {(c["i"], c["j"]) for c in result["tournament"]["comparisons"]}
    assert all(set(pair) == {1, 2} for pair in pairs)  # the two that came back, by their numbers
    assert shown["best"] == 2 and [(c["index"], c["id"]) for c in shown["candidates"]] == \
        [(0, "candidate-0"), (1, "candidate-1"), (2, "candidate-2")]
    assert shown["candidates"][0]["failed"] and shown["candidates"][0]["score"] is None
    assert "failed" not in shown["candidates"][2] and shown["candidates"][2]["score"] is not None
    assert len(shown["matrix"]) == 3 and shown["matrix"][0] == [None, None, None]  # a row, never judged
    assert shown["candidates"][0]["strength"] is None
    if schedule == "round_robin":  # every pair judged; the early pick compares none when the lead is clear
        assert pairs and shown["matrix"][2][1] > 0.5  # 2 (GOOD) beats 1
        strengths = result["tournament"]["strengths"]
        assert len(strengths) == 3 and strengths[0] is None and strengths[2] > strengths[1]
    else:
        assert {e["index"] for e in result["events"] if e["event"] == "failed"} == {0}
        assert {e["index"] for e in result["events"] if e["event"] == "score done"} == {1, 2}
