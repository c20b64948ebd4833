"""Through the fault server at 20 %: reruns complete the run and the result equals the fault-free one.

Every fault kind a real endpoint shows (429 with Retry-After, 500, a reset connection, a reply
slower than the deadline, malformed JSON, no logprobs, no score label in top_logprobs, a body cut
half-way) is drawn at random for one request in five. A run either succeeds or fails with exit 3
naming its failed calls, never with a default verdict; rerunning it retries only those, until the
result is exactly the fault-free one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability.crash_support import PROCESS_TIMEOUT_S, REPO, comparable, run_cli, start_cli, store_check
from tests.support.fault_server import RANDOM_FAULTS, FaultServer

POOL = REPO / "examples" / "terminal_bench" / "merge-diff-arc-agi-task.jsonl"
TRAJECTORY = REPO / "examples" / "progress" / "success_trajectory.json"
JOBS = {
    "select": lambda url: ["--deadline", "2", "select", str(POOL), "--model", f"{url}?retries=1#fault-model"],
    "track": lambda url: ["--deadline", "2", "track", str(TRAJECTORY), "--model", f"{url}?retries=1#fault-model"],
}
MAX_RERUNS = 12


def _until_done(args: list[str], store: Path) -> tuple[dict, int, list[str]]:
    """Run, and rerun while it fails with exit 3: (the result, how many runs, their error lines)."""
    errors = []
    for attempt in range(1, MAX_RERUNS + 1):
        proc = start_cli(args, store)
        out, err = proc.communicate(timeout=PROCESS_TIMEOUT_S)
        assert "Traceback" not in err, err
        if proc.returncode == 0:
            return json.loads(out), attempt, errors
        assert proc.returncode == 3, f"exit {proc.returncode}: {err[-2000:]}"
        errors.append(next(line for line in err.splitlines() if line.startswith("error:")))
    raise AssertionError(f"still failing after {MAX_RERUNS} runs: {errors[-3:]}")


@pytest.mark.parametrize("job", sorted(JOBS))
@pytest.mark.parametrize("seed", [1, 2])
def test_reruns_through_twenty_percent_faults_give_the_fault_free_result(job, seed, tmp_path):
    with FaultServer(varied=True, timeout_sleep_s=4) as clean:
        baseline = run_cli(JOBS[job](clean.url), tmp_path / "clean.sqlite3")
    with FaultServer(varied=True, fault_rate=0.2, fault_seed=seed, timeout_sleep_s=4) as faulty:
        result, runs, errors = _until_done(JOBS[job](faulty.url), tmp_path / "faulty.sqlite3")
        sent = faulty.faults_sent
    assert set(sent) & set(RANDOM_FAULTS), "no fault was injected"
    assert comparable(result) == comparable(baseline)
    check = store_check(tmp_path / "faulty.sqlite3")
    assert check["integrity"] == "ok" and check["running"] == 0
    assert all(line.endswith("(rerun to retry only the failed calls)") or "rerun" in line for line in errors), errors
