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
    planned = set(RANDOM_FAULTS)
    with FaultServer(varied=True, fault_rate=0.2, fault_seed=seed, timeout_sleep_s=4) as faulty:
        faulty.queue(*RANDOM_FAULTS)  # every kind at least once (the first requests), then 20 % at random
        result, runs, errors = _until_done(JOBS[job](faulty.url), tmp_path / "faulty.sqlite3")
        sent = faulty.faults_sent
    assert set(sent) == planned, f"injected {sorted(set(sent))}, planned {sorted(planned)}"
    # every kind was survived: the runs that met them end in exactly the fault-free result
    assert comparable(result) == comparable(baseline)
    check = store_check(tmp_path / "faulty.sqlite3")
    assert check["integrity"] == "ok" and check["running"] == 0
    assert all(line.endswith("(rerun to retry only the failed calls)") or "rerun" in line for line in errors), errors



@pytest.mark.parametrize("kind", RANDOM_FAULTS)
def test_each_fault_kind_alone_is_survived(kind, tmp_path):
    """One fault of one kind, on the first request: it is the one injected, and the run survives it:
    the call is retried within the run, or the run fails with exit 3 and its rerun sentence and one
    rerun retries it; either way the result is exactly the fault-free one."""
    with FaultServer(varied=True, timeout_sleep_s=4) as clean:
        select_baseline = run_cli(JOBS["select"](clean.url), tmp_path / "clean.sqlite3")
    with FaultServer(varied=True, timeout_sleep_s=4) as faulty:
        faulty.queue(kind)
        result, runs, errors = _until_done(JOBS["select"](faulty.url), tmp_path / "faulty.sqlite3")
        sent = faulty.faults_sent
    assert sent == [kind]
    assert comparable(result) == comparable(select_baseline)
    assert runs <= 2 and len(errors) == runs - 1, (runs, errors)  # one fault: at most one failed run
    assert all("rerun" in line for line in errors), errors
