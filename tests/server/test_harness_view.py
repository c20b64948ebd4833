"""The dashboard's harness view over a real harness run (scripted chat test double as the model)."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from tests.support.scripted_chat import ScriptedChat, call, say
from veriscale.engine.store import Store
from veriscale.harness.protocol.layout import RunLayout
from veriscale.harness.protocol.protocol_runner import RunOptions, run_tasks
from veriscale.harness.workspace.materialize import materialize
from veriscale.server.harness_view import HarnessViewError, harness_view

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "harness" / "quarterly_report"
SECRET = "TOP-SECRET-XYZ"
RESOLVER = {"entries": [{"id": "R1", "claim": "report.md:year-over-year revenue growth (%)", "question": "Which growth?",
                         "checks": ["read the inputs"], "findings": "restated base gives 20.0%", "verdict": "20"}]}
CHALLENGER = {"entries": [{"id": "C1", "claim": "active customers at quarter end = 1,240", "attempt": "Q3 row",
                           "finding": "1,240 is the Q2 figure", "holds": False, "because": "the Q3 row says 1,310"}]}
FINISH = {"base": "r01", "reason": "best base", "unresolved": ["headcount source"],
          "revisions": [{"file": "report.md", "change": "customers 1,310", "evidence": ["challenger:C1"]}]}
REPAIRED = "# Q3 2024 results\n\nActive customers: 1,310\n"


@pytest.fixture(scope="module")
def materialized_task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("materialized")
    materialize(FIXTURE, root / "quarterly_report", seed=11)
    return root / "quarterly_report"


def _write(path: str, doc: object):
    return call("write", path=path, content=json.dumps(doc))


def scripted_sessions() -> ScriptedChat:
    """TEST DOUBLE — the four sessions of an artifact run: both ledgers, the pick of r01, the repair."""
    return ScriptedChat({
        "resolve": [_write("ledger.json", RESOLVER), say("done")],
        "challenge": [_write("ledger.json", CHALLENGER), say("done")],
        "adjudicate": [_write("finish.json", FINISH), say("done")],
        "deliver": [call("write", path="out/deliverables/report.md", content=REPAIRED),
                    _write("repair.json", {"base": "r01", "changes": [
                        {"file": "report.md", "summary": "customers", "evidence": ["challenger:C1"]}]}),
                    say("delivered")],
    })


@pytest.fixture()
def harness_run(materialized_task: Path, tmp_path: Path) -> dict:
    """A real artifact-contract harness run of one task, recorded in a temporary store."""
    task = tmp_path / "tasks" / "quarterly_report"
    shutil.copytree(materialized_task, task)
    chat = scripted_sessions()
    options = RunOptions(model_uri="scripted", contract="artifact", no_jail=True, run_id="v", max_steps=8,
                         skills_dirs=[], store_path=tmp_path / "store.sqlite3")
    summary = run_tasks([task], options, backend=chat)
    store = Store.open(tmp_path / "store.sqlite3")
    (task_run,) = store.child_runs(summary["store_run"])
    return {"store": store, "parent": summary["store_run"], "task_run": task_run, "task": task,
            "layout": RunLayout.for_task(task, "v"), "root": tmp_path}


def test_view_shows_claim_map_ledgers_adjudication_and_the_repaired_diff(harness_run: dict) -> None:
    store, layout, task_run = harness_run["store"], harness_run["layout"], harness_run["task_run"]
    view = harness_view(store, harness_run["parent"], (harness_run["root"],))
    assert (view["run_id"], view["command"], view["status"]) == (harness_run["parent"], "harness run", "ok")
    (task,) = view["tasks"]
    assert task["run_id"] == task_run.id and task["readable"] and task["problems"] == []
    assert task["outcome"] == "delivered" and task["phases"]["deliver"]["status"] == "completed"
    # the claims split exactly as the claim map says, each with the rollouts behind it
    claim_map = json.loads((layout.claims_dir / "claims.json").read_text())
    for status in ("consensus", "disputed", "omitted"):
        expected = [c["key"] for c in claim_map["claims"] if c["status"] == status]
        assert expected and [c["id"] for c in task["claims"][status]] == expected
    growth = next(c for c in task["claims"]["disputed"] if c["id"] == "report.md:year-over-year revenue growth (%)")
    assert growth["rollouts"] == ["r01", "r02", "r03", "r04"] and "20 (r01, r03, r04)" in growth["text"]
    omitted = task["claims"]["omitted"][0]
    assert omitted["missing_from"] == ["r03"] and "r03" not in omitted["rollouts"]
    # both ledgers parsed; the base is the store's; revisions carry the ledger entry they cite
    assert task["ledgers"]["resolver"] == RESOLVER and task["ledgers"]["challenger"] == CHALLENGER
    assert task["base"] == task_run.result["base"] == task["adjudication"]["base"] == "r01"
    adjudication = task["adjudication"]
    assert adjudication["reason"] == "best base" and adjudication["finish"] == FINISH
    (revision,) = adjudication["revisions"]
    assert revision["evidence_entries"] == [{"ref": "challenger:C1", "entry": CHALLENGER["entries"][0]}]
    assert adjudication["repair"]["changes"][0]["summary"] == "customers"
    # the repaired file's diff against the base rollout; the docx is binary and unchanged
    diffs = {d["path"]: d for d in task["diffs"]}
    assert set(diffs) == {"report.md", "report.docx"}  # no *.view.txt sidecars
    report = diffs["report.md"]
    assert report["status"] == "modified" and report["diff"].startswith("--- r01/report.md\n+++ delivered/report.md")
    assert "-Active customers: 1,240" in report["diff"] and "+Active customers: 1,310" in report["diff"]
    assert "-Headcount: 212" in report["diff"]
    assert diffs["report.docx"]["status"] == "binary" and diffs["report.docx"]["diff"] == ""
    assert diffs["report.docx"]["changed"] is False
    json.dumps(view, allow_nan=False)
    # one task's own id gives the same task
    alone = harness_view(store, task_run.id, (harness_run["root"],))
    assert alone["command"] == "harness task" and alone["tasks"] == [task]


def test_a_long_diff_is_capped_with_a_count_of_the_rest(harness_run: dict) -> None:
    full = harness_view(harness_run["store"], harness_run["parent"], (harness_run["root"],))
    capped = harness_view(harness_run["store"], harness_run["parent"], (harness_run["root"],), max_diff_lines=3)
    lines = next(d for d in full["tasks"][0]["diffs"] if d["path"] == "report.md")["diff"].split("\n")
    short = next(d for d in capped["tasks"][0]["diffs"] if d["path"] == "report.md")["diff"].split("\n")
    assert len(lines) > 4 and short == lines[:3] + [f"… {len(lines) - 3} more lines"]


def test_a_run_folder_outside_the_allowed_roots_is_not_read(harness_run: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k))
    elsewhere = harness_run["root"] / "elsewhere"
    elsewhere.mkdir()
    (task,) = harness_view(harness_run["store"], harness_run["parent"], (elsewhere,))["tasks"]
    monkeypatch.undo()
    run_dir = str(harness_run["layout"].root)
    assert task["readable"] is False and task["run_dir"] == run_dir
    assert f"'{run_dir}' is outside" in task["unreadable_reason"]
    assert f"--allow-dir {Path(run_dir).parent}" not in task["unreadable_reason"], "no folder is suggested to a client"
    assert task["outcome"] == "delivered" and task["base"] == "r01" and task["phases"]["resolve"]["status"] == "completed"
    assert task["cost"]["calls"] == 9
    assert task["ledgers"] == {"resolver": None, "challenger": None} and task["diffs"] == []
    assert all(group == [] for group in task["claims"].values())
    assert opened == []  # not a single file or folder opened


def test_a_task_folder_outside_the_allowed_roots_gives_no_diffs_but_the_rest(harness_run: dict) -> None:
    runs_only = harness_run["layout"].root.parent  # quarterly_report.runs/, not the task folder beside it
    (task,) = harness_view(harness_run["store"], harness_run["parent"], (runs_only,))["tasks"]
    assert task["readable"] and task["ledgers"]["resolver"] == RESOLVER and task["diffs"] == []
    assert any(f"task folder '{harness_run['task']}' is outside" in p and "--allow-dir" in p for p in task["problems"])


def test_planted_links_and_a_fifo_are_refused_and_nothing_leaks(harness_run: dict) -> None:
    layout, root = harness_run["layout"], harness_run["root"]
    host = root / "host"
    host.mkdir()
    ledger = {"entries": [{**RESOLVER["entries"][0], "findings": SECRET}]}
    (host / "secret.json").write_text(json.dumps(ledger))
    (host / "ledger.json").write_text(json.dumps({"entries": [{**CHALLENGER["entries"][0], "because": SECRET}]}))
    for planted, target in ((layout.record("resolve"), host / "secret.json"),
                            (layout.claims_dir / "claims.json", host / "secret.json"),
                            (layout.delivery_dir / "deliverables" / "report.md", host / "secret.json")):
        planted.unlink()
        planted.symlink_to(target)
    shutil.rmtree(layout.session_dir("challenge"))
    layout.session_dir("challenge").symlink_to(host, target_is_directory=True)  # a linked folder on the way
    os.mkfifo(layout.delivery_dir / "deliverables" / "notes.md")

    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(view=harness_view(
        harness_run["store"], harness_run["parent"], (root,))), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "harness_view hung on the planted FIFO"
    view = result["view"]
    assert SECRET not in json.dumps(view)
    (task,) = view["tasks"]
    assert task["readable"] and task["ledgers"] == {"resolver": None, "challenger": None}
    assert all(group == [] for group in task["claims"].values())
    problems = "\n".join(task["problems"])
    assert "sessions/resolve/ledger.json' is a link" in problems and "claims/claims.json' is a link" in problems
    assert "challenger record was not read" in problems and "sessions/challenge' is not a plain folder" in problems
    assert "'notes.md' is a FIFO" in problems and "'report.md' is a symlink" in problems
    diffs = {d["path"]: d["status"] for d in task["diffs"]}
    assert diffs == {"report.docx": "binary", "report.md": "removed"}  # the linked copy is not the delivered file


def test_unknown_and_non_harness_runs_are_refused(harness_run: dict) -> None:
    store = harness_run["store"]
    with pytest.raises(HarnessViewError, match="run 9999 is not in the store"):
        harness_view(store, 9999, (harness_run["root"],))
    other = store.start_run("verify", "scripted", {})
    with pytest.raises(HarnessViewError, match="'verify' run, not a harness run"):
        harness_view(store, other, (harness_run["root"],))


def test_a_task_still_running_says_so_and_not_that_it_failed(tmp_path: Path) -> None:
    """Its run folder is recorded when it ends; until then the page said "it failed before it had one"."""
    store = Store.open(tmp_path / "s.sqlite3")
    parent = store.start_run("harness run", "scripted", {})
    running = store.start_run("harness task", "scripted", {"task": str(tmp_path / "quarterly_report")}, parent_id=parent)
    failed = store.start_run("harness task", "scripted", {"task": str(tmp_path / "data_cleanup")}, parent_id=parent)
    store.finish_run(failed, "failed", {"task": "data_cleanup", "outcome": "error", "error": "no rollouts"})
    tasks = {t["run_id"]: t for t in harness_view(store, parent, (tmp_path,))["tasks"]}
    assert tasks[running]["outcome"] == "running"
    assert tasks[running]["unreadable_reason"] == "this task is still running: its run folder is shown when it ends"
    assert tasks[failed]["unreadable_reason"] == "no run folder was recorded for this task (it failed before it had one)"


def test_records_of_phases_that_failed_or_were_skipped_are_not_listed_as_problems(harness_run: dict) -> None:
    """A failed challenge wrote no ledger and a skipped delivery no files: that is shown as "not
    recorded", not as read errors; a completed phase whose record is gone is still a problem."""
    store, layout = harness_run["store"], harness_run["layout"]
    layout.record("challenge").unlink()
    layout.record("adjudicate").unlink()
    shutil.rmtree(layout.delivery_dir)
    record = dict(harness_run["task_run"].result)
    record["phases"] = {**record["phases"], "challenge": {"status": "failed", "reason": "hit the step limit"},
                        "deliver": {"status": "skipped", "reason": "no valid finish.json"}}
    task_run = store.start_run("harness task", "scripted", harness_run["task_run"].args)
    store.finish_run(task_run, "failed", record)
    (task,) = harness_view(store, task_run, (harness_run["root"],))["tasks"]
    assert task["readable"] and task["ledgers"]["challenger"] is None and task["ledgers"]["resolver"]
    assert task["diffs"] == []
    assert len(task["problems"]) == 1 and task["problems"][0].startswith("finish record was not read: ")
