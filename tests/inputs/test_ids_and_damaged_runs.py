"""Run and job ids are validated, and a run whose stored JSON is corrupt is shown as damaged.

``runs show`` with an id SQLite cannot hold, a negative or a non-numeric id gets one sentence;
a ``runs.result`` or ``runs.args`` corrupted outside veriscale does not crash ``runs list``,
``runs show``, ``runs export`` or the server's views (the CLI in a subprocess, the server over
real HTTP; no model is needed).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.inputs.cli import one_sentence, run_cli
from tests.support.dashboard import dashboard
from veriscale.engine.store import Store

TOO_BIG = "9223372036854775808"  # 2**63: one past SQLite's largest integer


@pytest.mark.parametrize("given", [TOO_BIG, "-1", "0", "abc", "1e3", "٣"])
def test_runs_show_refuses_an_id_no_run_can_have(tmp_path, given):
    """(A leading "-" would read as an option, so the id follows "--", as a shell user would write it.)"""
    Store.open(tmp_path / "s.sqlite3").start_run("score", "m", {})
    one_sentence(run_cli("runs", "show", "--store", str(tmp_path / "s.sqlite3"), "--", given), "is not a run id",
                 "from 1 to 9223372036854775807", "runs list")


def _damaged_store(path: Path) -> tuple[int, int, int]:
    store = Store.open(path)
    ok = store.start_run("score", "m", {"task": "t.md"})
    store.finish_run(ok, "ok", {"reward": 0.75})
    bad_result = store.start_run("select", "m", {"paths": ["a.md"]})
    store.finish_run(bad_result, "ok", {"ranking": []})
    bad_args = store.start_run("track", "m", {"trajectory": ["t.json"]})
    store.finish_run(bad_args, "ok", {"curves": []})
    with sqlite3.connect(path) as conn:  # what a disk fault or a hand edit leaves
        conn.execute("UPDATE runs SET result = ? WHERE id = ?", ('{"ranking": [', bad_result))
        conn.execute("UPDATE runs SET args = ? WHERE id = ?", ("[[[", bad_args))
    return ok, bad_result, bad_args


def test_runs_commands_show_a_corrupt_run_as_damaged(tmp_path):
    path = tmp_path / "s.sqlite3"
    ok, bad_result, bad_args = _damaged_store(path)
    listed = run_cli("runs", "list", "--store", str(path))
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert "damaged" in listed.stdout and "reward 0.750" in listed.stdout
    rows = {r["id"]: r for r in json.loads(run_cli("runs", "list", "--json", "--store", str(path)).stdout)}
    assert rows[bad_result]["summary"].startswith("damaged: its stored result")
    assert rows[bad_args]["summary"].startswith("damaged: its stored args") and rows[bad_args]["args"] == {}
    assert rows[ok]["summary"] == "reward 0.750"
    shown = run_cli("runs", "show", str(bad_result), "--store", str(path))
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["damaged"] == ["result"] and doc["result"] is None and doc["args"] == {"paths": ["a.md"]}
    exported = run_cli("runs", "export", "--store", str(path))
    assert exported.returncode == 0 and len(exported.stdout.splitlines()) == 3, exported.stderr


def test_the_server_views_show_a_corrupt_run_as_damaged(tmp_path):
    ok, bad_result, bad_args = _damaged_store(tmp_path / "s.sqlite3")
    with dashboard(tmp_path / "s.sqlite3", model=None) as d, d.client() as c:
        page = c.get("/api/runs")
        assert page.status_code == 200, page.text
        assert {r["id"]: r.get("damaged") for r in page.json()["runs"]} == {
            ok: None, bad_result: ["result"], bad_args: ["args"]}
        run = c.get(f"/api/runs/{bad_result}")
        assert run.status_code == 200 and run.json()["damaged"] == ["result"]
        assert c.get(f"/api/runs/{bad_args}").json()["args"] == {}
        assert c.get(f"/api/runs/{bad_result}/selection").status_code == 404
        assert c.get(f"/api/runs/{bad_args}/progress").status_code == 200


def test_the_server_refuses_ids_out_of_range_with_a_sentence(tmp_path):
    with dashboard(tmp_path / "s.sqlite3", model=None) as d, d.client() as c:
        run = d.store.start_run("track", "m", {})
        d.store.finish_run(run, "ok", {"curves": []})
        for route in (f"/api/runs/{TOO_BIG}", f"/api/runs/{TOO_BIG}/progress", f"/api/runs/{TOO_BIG}/calls",
                      f"/api/jobs/{TOO_BIG}", f"/api/jobs/{TOO_BIG}/result", "/api/runs/-1", "/api/jobs/0",
                      f"/api/runs?offset={TOO_BIG}", f"/api/runs/{run}/stream?after={TOO_BIG}"):
            answer = c.get(route)
            assert answer.status_code == 422, (route, answer.status_code, answer.text)
            assert answer.json()["error"].endswith("fix it and send it again"), answer.text
        assert c.post(f"/api/jobs/{TOO_BIG}/cancel").status_code == 422
        with c.stream("GET", f"/api/runs/{run}/stream", headers={"last-event-id": "9" * 30}) as stream:
            assert stream.status_code == 200 and "event: end" in "".join(stream.iter_text())
