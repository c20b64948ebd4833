"""SIGKILL at seeded points: a rerun gives the uninterrupted result and repeats no finished call.

The fault server kills the ``veriscale`` process when the k-th upstream request arrives (k drawn
from a seed), so each crash lands at a known call. After each kill: SQLite's integrity check
passes; the rerun's JSON equals an uninterrupted run's (timestamps and cost left out; the
server's answers are deterministic, so probabilities are exactly equal); the rerun makes
exactly the calls that had not finished (``model_calls = total - finished``, every finished
one a cache hit); and no run is left ``running``.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.crash_support import (PROCESS_TIMEOUT_S, REPO, cli_env, comparable, run_cli, start_cli,
                                             store_check)
from tests.support.fault_server import FaultServer

POOL = REPO / "examples" / "terminal_bench" / "merge-diff-arc-agi-task.jsonl"
TRAJECTORY = REPO / "examples" / "progress" / "success_trajectory.json"

JOBS = {
    "select": lambda url: ["select", str(POOL), "--model", f"{url}#fault-model", "--concurrency", "2"],
    "track": lambda url: ["track", str(TRAJECTORY), "--model", f"{url}#fault-model", "--concurrency", "2"],
}
#: seeded kill points per job (20 in all with the server-job and harness suites)
KILLS = {"select": range(8), "track": range(4)}


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    """Each job run once without a crash: its output and how many upstream requests it made."""
    out = {}
    for job, args in JOBS.items():
        with FaultServer(varied=True) as srv:
            store = tmp_path_factory.mktemp(job) / "store.sqlite3"
            out[job] = (run_cli(args(srv.url), store), len(srv.completion_requests()))
    return out


def _runs_running(store: Path) -> list[dict]:
    listed = subprocess.run([sys.executable, "-m", "veriscale", "runs", "list", "--json", "--store", str(store)],
                            capture_output=True, text=True, env=cli_env(), timeout=PROCESS_TIMEOUT_S)
    assert listed.returncode == 0, listed.stderr
    return [run for run in json.loads(listed.stdout) if run["status"] == "running"]


@pytest.mark.parametrize("job,seed", [(job, seed) for job, seeds in KILLS.items() for seed in seeds])
def test_a_kill_at_a_seeded_call_then_a_rerun_equals_the_uninterrupted_run(job, seed, baselines, tmp_path):
    baseline, total = baselines[job]
    kill_at = random.Random(job).sample(range(1, total), len(KILLS[job]))[seed]  # distinct points
    store = tmp_path / "store.sqlite3"
    with FaultServer(varied=True) as srv:
        proc = start_cli(JOBS[job](srv.url), store)
        srv.kill_at(proc.pid, kill_at)
        proc.communicate(timeout=PROCESS_TIMEOUT_S)
        assert proc.returncode == -9, f"the process was not killed at request {kill_at} of {total}"
        after_kill = store_check(store)
        assert after_kill["integrity"] == "ok"
        assert after_kill["ok_calls"] < total

        sent_before = len(srv.completion_requests())
        rerun = run_cli(JOBS[job](srv.url), store)
        sent_by_rerun = len(srv.completion_requests()) - sent_before

    assert comparable(rerun) == comparable(baseline)
    assert sent_by_rerun == total - after_kill["ok_calls"], "a finished call was paid for again"
    if "usage" in rerun:  # select reports its own count too
        assert rerun["usage"]["model_calls"] == sent_by_rerun
        assert rerun["usage"]["cache_hits"] >= after_kill["ok_calls"]
    assert store_check(store)["integrity"] == "ok"
    assert _runs_running(store) == [], "a killed run still says running"
