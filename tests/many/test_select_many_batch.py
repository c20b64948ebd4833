"""``select-many --batch``: the model calls sent as OpenAI Batch API batches, in waves.

Every test runs the real command against the Batch API test double (``tests.support.batch_double``,
a real HTTP server on 127.0.0.1 that grades by the word GOOD): the same picks and probabilities as
direct calls, a run killed with a batch in flight resumed by polling that batch (never submitting
it again), a failed batch as error lines, and endpoints that cannot batch refused in one sentence.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.batch_double import BatchDouble
from tests.support.scripted_model import ScriptedScoreModel, registered_scheme
from veriscale.cli import app
from veriscale.engine.store import Store

GUARD_S = 600  # a hang guard only: the waits below end on events
TASKS = ("t1", "t2", "t3")


def _write_pool(path: Path, runs: int = 3) -> Path:
    """``runs`` chat runs of each task; run 1 of each is the GOOD one."""
    lines = []
    for task in TASKS:
        for r in range(runs):
            answer = f"answer {r} of {task}" + (" GOOD" if r == 1 else "") + " done" * r
            lines.append({"id": f"{task}-r{r}", "task_id": task, "messages": [
                {"role": "user", "content": f"Task {task}: write the answer."},
                {"role": "assistant", "content": answer}]})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _lines(path: Path) -> dict[str, dict]:
    return {line["task"]: line for line in map(json.loads, path.read_text().splitlines())}


def _args(pool: Path, out: Path, store: Path, url: str, *more: str) -> list[str]:
    return ["select-many", str(pool), "-o", str(out), "--model", url, "--store", str(store), "--json", *more]


def _label_probs(store: Path) -> dict[str, dict[str, float]]:
    rows, _ = Store.open(store).execute("SELECT key, response FROM calls WHERE status = 'ok'")
    return {key: json.loads(response)["label_probs"] for key, response in rows}


def test_batched_calls_give_the_picks_and_probabilities_of_direct_calls(tmp_path: Path) -> None:
    pool = _write_pool(tmp_path / "pool.jsonl")
    runner = CliRunner()
    with BatchDouble() as srv:
        batched = runner.invoke(app, _args(pool, tmp_path / "b.jsonl", tmp_path / "b.sqlite3", srv.url, "--batch"))
        assert batched.exit_code == 0, batched.output
        sent_in_batches = len(srv.custom_ids())
        batches = len(srv.batches)
        direct_before = srv.direct
        direct = runner.invoke(app, _args(pool, tmp_path / "d.jsonl", tmp_path / "d.sqlite3", srv.url))
        assert direct.exit_code == 0, direct.output
        first = srv.batches[next(iter(srv.batches))]

    summary = json.loads(batched.stdout)
    assert summary["decided"] == 3 and summary["model_calls"] > 0
    # every model call of the batched run went out in a batch, and the calls of one round of every task
    # share a batch: far fewer batches than calls, the first holding a request of each task
    assert sent_in_batches == summary["model_calls"] and len(srv.batches) == batches
    assert batches < summary["model_calls"] / len(TASKS)
    assert all(any(f"Task {task}:" in json.dumps(line["body"]) for line in first["lines"]) for task in TASKS)
    assert srv.direct - direct_before > sent_in_batches  # the direct run asked each call on its own

    b, d = _lines(tmp_path / "b.jsonl"), _lines(tmp_path / "d.jsonl")
    assert sorted(b) == sorted(d) == list(TASKS)
    for task in TASKS:
        assert b[task]["pick"] == d[task]["pick"] == f"{task}-r1"
        assert b[task]["ranking"] == d[task]["ranking"]
        assert b[task]["confidence"] == pytest.approx(d[task]["confidence"], abs=1e-9)
    probs_b, probs_d = _label_probs(tmp_path / "b.sqlite3"), _label_probs(tmp_path / "d.sqlite3")
    assert probs_b.keys() == probs_d.keys() and len(probs_b) == summary["model_calls"]
    for key, probs in probs_b.items():
        assert probs == pytest.approx(probs_d[key], abs=1e-9)
    assert not (tmp_path / "b.jsonl.batches").exists()  # a run that ended leaves no ledger


def test_a_run_killed_with_a_batch_in_flight_is_resumed_by_polling_that_batch(tmp_path: Path) -> None:
    pool, out, store = _write_pool(tmp_path / "pool.jsonl"), tmp_path / "picks.jsonl", tmp_path / "s.sqlite3"
    with BatchDouble() as srv:
        srv.hold = True  # the first batch stays in progress until released
        child = subprocess.Popen([sys.executable, "-m", "veriscale", *_args(pool, out, store, srv.url, "--batch")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            assert srv.polled.wait(GUARD_S), "the run never polled a batch"  # recorded, then polled
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        # the batches polled before the kill: recorded in the ledger (a poll comes after the record)
        held = {bid: batch for bid, batch in srv.batches.items() if batch["polls"] > 0}
        ledger = (tmp_path / "picks.jsonl.batches").read_text()
        assert held and all(b["status"] == "in_progress" and bid in ledger for bid, b in held.items())
        polls_before = {bid: batch["polls"] for bid, batch in held.items()}
        srv.release()

        rerun = CliRunner().invoke(app, _args(pool, out, store, srv.url, "--batch"))
        assert rerun.exit_code == 0, rerun.output
        every = srv.custom_ids()

    for bid, batch in held.items():  # the rerun polled each recorded batch, and never submitted its calls again
        assert batch["polls"] > polls_before[bid] and batch["status"] == "completed"
        assert all(every.count(cid) == 1 for cid in batch["custom_ids"])
    lines = _lines(out)
    assert {task: line["pick"] for task, line in lines.items()} == {task: f"{task}-r1" for task in TASKS}
    assert all(line["error"] is None for line in lines.values())
    assert f"{len(held)} batch(es) of an earlier run read back" in " ".join(json.loads(rerun.stdout)["notes"])
    assert not (tmp_path / "picks.jsonl.batches").exists()


def test_a_rerun_of_some_tasks_keeps_the_other_tasks_replies_for_the_run_that_decides_them(tmp_path: Path) -> None:
    pool, out, store = _write_pool(tmp_path / "pool.jsonl"), tmp_path / "picks.jsonl", tmp_path / "s.sqlite3"
    ledger = tmp_path / "picks.jsonl.batches"
    with BatchDouble() as srv:
        srv.hold = True  # the first wave (every task's first calls) stays in progress until released
        child = subprocess.Popen([sys.executable, "-m", "veriscale", *_args(pool, out, store, srv.url, "--batch")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            assert srv.polled.wait(GUARD_S), "the run never polled a batch"
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        held = {bid: batch for bid, batch in srv.batches.items() if batch["polls"] > 0}
        assert held
        srv.release()

        some = CliRunner().invoke(app, _args(pool, out, store, srv.url, "--batch", "--tasks", "t1"))
        assert some.exit_code == 0, some.output
        assert set(_lines(out)) == {"t1"}
        assert all(bid in ledger.read_text() for bid in held)  # t2's and t3's replies are still recorded
        assert "kept in the ledger" in " ".join(json.loads(some.stdout)["notes"])

        rest = CliRunner().invoke(app, _args(pool, out, store, srv.url, "--batch"))
        assert rest.exit_code == 0, rest.output
        every = srv.custom_ids()

    for batch in held.values():  # no request of the first run's batch was ever sent again
        assert all(every.count(cid) == 1 for cid in batch["custom_ids"])
    assert {task: line["pick"] for task, line in _lines(out).items()} == {task: f"{task}-r1" for task in TASKS}
    assert not ledger.exists()


def test_a_failed_batch_gives_its_tasks_error_lines_and_exit_3_and_a_rerun_decides_them(tmp_path: Path) -> None:
    pool, out, store = _write_pool(tmp_path / "pool.jsonl"), tmp_path / "picks.jsonl", tmp_path / "s.sqlite3"
    runner = CliRunner()
    with BatchDouble() as srv:
        srv.fail = True
        failed = runner.invoke(app, _args(pool, out, store, srv.url, "--batch"))
        assert failed.exit_code == 3, failed.output
        lines = _lines(out)
        assert sorted(lines) == list(TASKS)
        for line in lines.values():
            assert line["pick"] is None and "ended failed" in line["error"] and "double_failure" in line["error"]
            assert "\n" not in line["error"]
        assert "3 task(s) have no pick" in failed.stderr

        srv.fail = False
        again = runner.invoke(app, _args(pool, out, store, srv.url, "--batch"))
        assert again.exit_code == 0, again.output
    assert {task: line["pick"] for task, line in _lines(out).items()} == {task: f"{task}-r1" for task in TASKS}


def test_an_endpoint_without_a_batch_api_is_one_sentence_before_any_work(tmp_path: Path) -> None:
    pool, out = _write_pool(tmp_path / "pool.jsonl"), tmp_path / "picks.jsonl"
    with BatchDouble(batch_api=False) as srv:
        result = CliRunner().invoke(app, _args(pool, out, tmp_path / "s.sqlite3", srv.url, "--batch"))
        asked = srv.direct
    assert result.exit_code == 2, result.output
    said = result.stderr.strip()
    assert said.startswith("error:") and len(said.splitlines()) == 1
    assert "offers no Batch API" in said and "drop --batch" in said
    assert not out.exists() and asked == 0 and not srv.batches


def test_batch_is_refused_in_one_sentence_for_a_model_not_served_over_http(tmp_path: Path) -> None:
    pool, out = _write_pool(tmp_path / "pool.jsonl"), tmp_path / "picks.jsonl"
    with registered_scheme("scripted", lambda uri: ScriptedScoreModel(), ("scripted",)):
        result = CliRunner().invoke(app, _args(pool, out, tmp_path / "s.sqlite3", "scripted", "--batch"))
    assert result.exit_code == 2, result.output
    said = result.stderr.strip()
    assert said.startswith("error:") and len(said.splitlines()) == 1
    assert "is not one" in said and "drop --batch" in said and not out.exists()
    ray = CliRunner().invoke(app, _args(pool, out, tmp_path / "s.sqlite3", "http://127.0.0.1:9/v1", "--batch",
                                        "--executor", "ray"))
    assert ray.exit_code == 2 and "drop --executor ray, or drop --batch" in ray.stderr and not out.exists()
