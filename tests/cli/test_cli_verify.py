"""The CLI end to end: JSON shape, dry runs, runs list/show/export, and one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer
from tests.support.hang_guard import guarded_run

EX = Path(__file__).resolve().parents[2] / "examples" / "pair"


def cli(*args, store=None, input=None):
    cmd = [sys.executable, "-m", "veriscale", *args]
    if store is not None:
        cmd += ["--store", str(store)]
    return guarded_run(cmd, capture_output=True, text=True, input=input)  # CPU progress, not wall time


def assert_one_line_error(proc, *needles):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    err = " ".join(proc.stderr.split())
    assert err.startswith("error:") or "error:" in err
    for n in needles:
        assert n in err, err


@pytest.fixture(scope="module")
def server():
    with FaultServer() as srv:
        yield srv


def test_compare_json_through_http_and_rerun_is_free(server, tmp_path):
    store = tmp_path / "s.sqlite3"
    args = ["compare", str(EX / "task.md"), str(EX / "a.md"), str(EX / "b.md"), "--model", server.url + "#fault-model", "--json"]
    first = cli(*args, store=store)
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    for key in ("reward_a", "reward_b", "p_a_wins", "criteria", "usage"):
        assert key in out
    crit = next(iter(out["criteria"].values()))
    assert sum(crit["label_probs"]["a"].values()) == pytest.approx(1.0) and 0 < crit["label_mass"]["a"] <= 1
    assert out["usage"]["model_calls"] == 12 and {"cache_hits", "prompt_tokens"} <= set(out["usage"])
    second = json.loads(cli(*args, store=store).stdout)
    assert second["usage"]["model_calls"] == 0 and second["usage"]["cache_hits"] == 12


def test_score_reads_stdin_and_runs_are_listed(server, tmp_path):
    store = tmp_path / "s.sqlite3"
    proc = cli("score", str(EX / "task.md"), "-", "--model", server.url + "#fault-model", "--json", store=store,
               input="my answer")
    assert proc.returncode == 0, proc.stderr
    assert 0 <= json.loads(proc.stdout)["reward"] <= 1
    listed = json.loads(cli("runs", "list", "--json", store=store).stdout)
    assert listed[0]["command"] == "score" and listed[0]["status"] == "ok"
    shown = json.loads(cli("runs", "show", str(listed[0]["id"]), store=store).stdout)
    assert shown["result"]["reward"] is not None
    exported = cli("runs", "export", store=store).stdout.strip().splitlines()
    assert len(exported) == 1 and json.loads(exported[0])["command"] == "score"


def test_dry_run_spends_nothing(server, tmp_path):
    before = len(server.requests)
    proc = cli("compare", str(EX / "task.md"), str(EX / "a.md"), str(EX / "b.md"), "--model",
               server.url + "#fault-model", "--dry-run", "--json", store=tmp_path / "s.sqlite3")
    est = json.loads(proc.stdout)
    assert est["model_calls"] == 12 and est["prompt_tokens"] > 0
    assert len(server.requests) == before


def test_max_calls_refuses(server, tmp_path):
    proc = cli("compare", str(EX / "task.md"), str(EX / "a.md"), str(EX / "b.md"), "--model",
               server.url + "#fault-model", "--max-calls", "5", store=tmp_path / "s.sqlite3")
    assert_one_line_error(proc, "--max-calls")


def test_failed_calls_exit_nonzero_and_name_the_failure(server, tmp_path):
    server.queue(*["500"] * 20)
    proc = cli("score", str(EX / "task.md"), str(EX / "a.md"), "--model", server.url + "?retries=0#fault-model",
               "--concurrency", "1", store=tmp_path / "s.sqlite3")
    server.faults.clear()
    assert proc.returncode == 3 and "model calls failed" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args,needles", [
    (["compare", "missing.md", str(EX / "a.md"), str(EX / "b.md")], ["missing.md", "does not exist"]),
    (["compare", str(EX / "task.md"), "EMPTY", str(EX / "b.md")], ["empty"]),
    (["compare", str(EX / "task.md"), str(EX / "a.md"), str(EX / "b.md"), "--model", "gpt-9"], ["unknown model URI", "gpt-9"]),
    (["compare", str(EX / "task.md"), str(EX / "a.md"), str(EX / "b.md"), "--model", "http://127.0.0.1:9/v1"], ["cannot reach"]),
    (["compare", str(EX / "task.md"), str(EX / "a.md"), str(EX / "b.md"), "--criteria", "NOCRIT"], ["no criteria"]),
    (["compare", str(EX / "task.md"), str(EX / "a.md"), str(EX / "b.md"), "--scale", "stars"], ["unknown score scale"]),
    (["runs", "show", "999"], ["no run 999"]),
])
def test_bad_input_gives_one_clear_line(tmp_path, args, needles):
    empty = tmp_path / "empty.md"
    empty.write_text("  \n")
    nocrit = tmp_path / "nocrit.md"
    nocrit.write_text("no headings here\n")
    args = [str(empty) if a == "EMPTY" else str(nocrit) if a == "NOCRIT" else a for a in args]
    proc = cli(*args, store=tmp_path / "s.sqlite3")
    assert_one_line_error(proc, *needles)
    assert proc.returncode == 2


def test_server_without_logprobs_suggests_two_stage(server, tmp_path):
    server.queue("nologprobs")
    proc = cli("score", str(EX / "task.md"), str(EX / "a.md"), "--model", server.url + "#fault-model",
               "--concurrency", "1", store=tmp_path / "s.sqlite3")
    server.faults.clear()
    assert_one_line_error(proc, "no logprobs", "twostage:")


def test_multi_token_labels_are_refused_with_a_scale_that_works(tmp_path):
    proc = cli("score", str(EX / "task.md"), str(EX / "a.md"), "--scale", "labels:Unsatisfactorily,Splendiferous",
               store=tmp_path / "s.sqlite3")
    assert_one_line_error(proc, "not single tokens", "--scale letters")
