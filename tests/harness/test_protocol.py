"""The protocol end to end on the fixture tasks, with the scripted chat test double as the model."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.support.scripted_chat import ScriptedChat, call, say
from veriscale.harness.sessions.agent import AgentLimits
from veriscale.harness.sessions.executors import BuiltinExecutor
from veriscale.harness.protocol.layout import RunLayout
from veriscale.harness.protocol.task_protocol import ProtocolConfig, run_protocol
from veriscale.harness.workspace.contract import TaskWorkspace


@pytest.fixture()
def report_task(materialized: dict, tmp_path: Path) -> Path:
    """A private copy of the materialised quarterly_report task (4 rollouts, 2 disputed claims)."""
    task = tmp_path / "quarterly_report"
    shutil.copytree(materialized["quarterly_report"]["dir"], task)
    return task


def _write(path: str, doc: object):
    return call("write", path=path, content=json.dumps(doc))


def _resolver_ledger(verdict: str = "20") -> dict:
    return {"entries": [{
        "id": "R1", "claim": "report.md:year-over-year revenue growth (%)",
        "question": "Which growth figure is right?", "checks": ["read workspace inputs"],
        "findings": "Restated base gives 20.0%", "verdict": verdict}]}


CHALLENGER_LEDGER = {"entries": [{
    "id": "C1", "claim": "active customers at quarter end = 1,240", "attempt": "compare with the Q3 row",
    "finding": "1,240 is the Q2 figure", "holds": False, "because": "the Q3 row says 1,310"}]}


def _finish(base: str, revisions: list | None = None) -> dict:
    return {"base": base, "reason": "best base", "revisions": revisions or [], "unresolved": ["headcount source"]}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(task: Path, chat: ScriptedChat, *, contract: str = "artifact", run_id: str = "t", no_jail: bool = True) -> dict:
    config = ProtocolConfig(model_uri="scripted", contract=contract, no_jail=no_jail,
                            limits=AgentLimits(max_steps=8, wall_clock_s=120))
    return run_protocol(task, RunLayout.for_task(task, run_id), config, BuiltinExecutor(chat))


def test_full_artifact_run_validates_ledgers_delivers_and_restores_a_dropped_base_file(report_task: Path) -> None:
    layout = RunLayout.for_task(report_task, "t")
    revision = [{"file": "report.md", "change": "customers 1,310", "evidence": ["challenger:C1", "resolver:R1"]}]
    chat = ScriptedChat({
        "resolve": [
            call("read", path=str(layout.session_dir("challenge") / "ledger.json")),
            call("run", command=f"ls {layout.session_dir('challenge')}"),
            _write("ledger.json", _resolver_ledger()), say("done")],
        "challenge": [_write("ledger.json", CHALLENGER_LEDGER), say("done")],
        "adjudicate": [_write("finish.json", _finish("r01", revision)), say("done")],
        "deliver": [
            call("write", path="out/deliverables/report.md", content="# Q3 2024\nActive customers: 1,310\n"),
            call("run", command="rm out/deliverables/report.docx"),
            _write("repair.json", {"base": "r01", "changes": [
                {"file": "report.md", "summary": "customers", "evidence": ["challenger:C1"]}]}),
            say("delivered")],
    })
    outcome = _run(report_task, chat, no_jail=False)

    assert outcome["outcome"] == "delivered" and outcome["base"] == "r01" and outcome["revisions"] == 1
    assert {p: s["status"] for p, s in outcome["phases"].items()} == {
        "resolve": "completed", "challenge": "completed", "adjudicate": "completed", "deliver": "completed"}
    # isolation: the resolver could not read the challenger's folder, neither by tool nor in the jail
    resolver_tools = [m for m in chat.requests["resolve"][-1] if m["role"] == "tool"]
    assert "outside the folders" in resolver_tools[0]["content"]
    assert "exit code: 0" not in resolver_tools[1]["content"]
    # the resolver's prompt carries the agenda, the adjudicator sees both staged ledgers
    system = chat.requests["resolve"][0][0]["content"]
    assert "1. report." in system and "16.7" in system and "20" in system
    assert sorted(p.name for p in layout.evidence_dir.iterdir()) == ["challenger.json", "resolver.json"]
    # the gate: every base file is in the bundle; the dropped docx came back byte for byte
    base = TaskWorkspace.open(report_task).rollouts[0].relative_deliverables()
    delivered = layout.deliverables_dir
    assert {p.name for p in delivered.iterdir()} == set(base)
    assert _sha(delivered / "report.docx") == _sha(base["report.docx"])
    report = json.loads(layout.delivery_report.read_text())
    status = {f["path"]: f["status"] for f in report["files"]}
    assert status == {"report.docx": "restored", "report.md": "changed"}
    assert next(f for f in report["files"] if f["path"] == "report.md")["sha256"] == _sha(delivered / "report.md")
    # delivery continued the adjudication conversation in the same transcript
    transcript = [json.loads(line) for line in layout.transcript("adjudicate").read_text().splitlines()]
    contents = [e["message"].get("content") or "" for e in transcript if e["type"] == "message"]
    assert contents[0].startswith("Phase: adjudicate") and any(c.startswith("Phase: deliver") for c in contents)
    # cost is recorded per phase and in total
    saved = json.loads(layout.outcome_file.read_text())
    assert saved["cost"]["calls"] == sum(saved["phases"][p]["calls"] for p in ("resolve", "challenge", "adjudicate", "deliver"))
    assert saved["phases"]["deliver"]["calls"] == 4 and saved["phases"]["resolve"]["prompt_tokens"] == 400


def test_pick_only_delivers_the_base_unchanged_after_refusing_revisions(report_task: Path) -> None:
    revision = [{"file": "report.md", "change": "x", "evidence": ["challenger:C1"]}]
    chat = ScriptedChat({
        "resolve": [_write("ledger.json", _resolver_ledger()), say("done")],
        "challenge": [_write("ledger.json", CHALLENGER_LEDGER), say("done")],
        "adjudicate": [_write("finish.json", _finish("r02", revision)), say("done"),
                       _write("finish.json", _finish("r02")), say("done")],
    })
    outcome = _run(report_task, chat, contract="pick-only")
    assert outcome["outcome"] == "delivered" and outcome["base"] == "r02"
    nudge = [m for m in chat.requests["adjudicate"][2] if m["role"] == "user"][-1]["content"]
    assert "pick-only contract allows no revisions" in nudge
    assert "deliver" not in chat.requests and outcome["phases"]["deliver"]["executor"] == "none"
    base = TaskWorkspace.open(report_task).rollouts[1].relative_deliverables()
    delivered = RunLayout.for_task(report_task, "t").deliverables_dir
    assert {p.name: _sha(p) for p in delivered.iterdir()} == {name: _sha(p) for name, p in base.items()}


def test_pick_only_adjudication_that_insists_on_revisions_fails_and_chooses_no_base(report_task: Path) -> None:
    revision = [{"file": "report.md", "change": "x", "evidence": ["challenger:C1"]}]
    chat = ScriptedChat({
        "resolve": [_write("ledger.json", _resolver_ledger()), say("done")],
        "challenge": [_write("ledger.json", CHALLENGER_LEDGER), say("done")],
        "adjudicate": [_write("finish.json", _finish("r02", revision)), say("done"), say("no")],
    })
    outcome = _run(report_task, chat, contract="pick-only")
    assert outcome["outcome"] == "no base chosen" and outcome["base"] is None
    assert outcome["phases"]["adjudicate"]["status"] == "failed"
    assert "pick-only" in outcome["phases"]["adjudicate"]["reason"]
    assert outcome["phases"]["deliver"]["status"] == "skipped"
    assert not RunLayout.for_task(report_task, "t").deliverables_dir.exists()


def test_a_missing_ledger_fails_its_phase_after_one_nudge_and_the_run_goes_on(report_task: Path) -> None:
    chat = ScriptedChat({
        "resolve": [say("I think 20% is right."), say("Really, 20%.")],
        "challenge": [_write("ledger.json", CHALLENGER_LEDGER), say("done")],
        "adjudicate": [call("ls", path=str(RunLayout.for_task(report_task, "t").evidence_dir)),
                       _write("finish.json", _finish("r04")), say("done")],
        "deliver": [_write("repair.json", {"base": "r04", "changes": []}), say("done")],
    })
    outcome = _run(report_task, chat)
    resolve = outcome["phases"]["resolve"]
    assert resolve["status"] == "failed" and resolve["nudged"] and resolve["calls"] == 2
    assert "after one nudge" in resolve["reason"] and not resolve["record_valid"]
    assert len(chat.requests["resolve"]) == 2
    listing = [m for m in chat.requests["adjudicate"][-1] if m["role"] == "tool"][0]["content"]
    assert "challenger.json" in listing and "resolver.json" not in listing
    assert "resolver ledger: missing" in chat.requests["adjudicate"][0][0]["content"]
    assert outcome["outcome"] == "delivered" and outcome["base"] == "r04"


def test_revisions_citing_a_failed_ledger_are_rejected(report_task: Path) -> None:
    bad = [{"file": "report.md", "change": "x", "evidence": ["resolver:R1"]}]
    chat = ScriptedChat({
        "resolve": [say("no ledger"), say("still none")],
        "challenge": [_write("ledger.json", CHALLENGER_LEDGER), say("done")],
        "adjudicate": [_write("finish.json", _finish("r01", bad)), say("done"), say("done")],
    })
    outcome = _run(report_task, chat)
    assert outcome["phases"]["adjudicate"]["status"] == "failed"
    assert "cites resolver:R1" in outcome["phases"]["adjudicate"]["reason"]


def test_a_failed_delivery_falls_back_to_the_base(report_task: Path) -> None:
    chat = ScriptedChat({
        "resolve": [_write("ledger.json", _resolver_ledger()), say("done")],
        "challenge": [_write("ledger.json", CHALLENGER_LEDGER), say("done")],
        "adjudicate": [_write("finish.json", _finish("r01")), say("done")],
        "deliver": [call("write", path="out/deliverables/report.md", content="garbage"), say("done"), say("done")],
    })
    outcome = _run(report_task, chat)
    assert outcome["phases"]["deliver"]["status"] == "failed"
    assert outcome["outcome"] == "delivered base unchanged"
    base = TaskWorkspace.open(report_task).rollouts[0].relative_deliverables()
    delivered = RunLayout.for_task(report_task, "t").deliverables_dir
    assert _sha(delivered / "report.md") == _sha(base["report.md"])


def test_resume_skips_finished_phases_and_reruns_what_depends_on_a_rerun(report_task: Path) -> None:
    first = ScriptedChat({
        "resolve": [_write("ledger.json", _resolver_ledger()), say("done")],
        "challenge": [say("nothing"), say("nothing")],
        "adjudicate": [_write("finish.json", _finish("r01")), say("done")],
        "deliver": [_write("repair.json", {"base": "r01", "changes": []}), say("done")],
    })
    assert _run(report_task, first)["phases"]["challenge"]["status"] == "failed"

    second = ScriptedChat({
        "resolve": [say("must not be asked")],
        "challenge": [_write("ledger.json", CHALLENGER_LEDGER), say("done")],
        "adjudicate": [_write("finish.json", _finish("r03")), say("done")],
        "deliver": [_write("repair.json", {"base": "r03", "changes": []}), say("done")],
    })
    outcome = _run(report_task, second)
    assert "resolve" not in second.requests
    assert outcome["phases"]["resolve"]["resumed"] is True
    assert outcome["phases"]["challenge"]["status"] == "completed" and outcome["base"] == "r03"
    assert len(second.requests["adjudicate"]) == 2  # fresh conversation, not the old one continued

    third = ScriptedChat({})
    again = _run(report_task, third)
    assert third.requests == {}
    assert all(again["phases"][p]["resumed"] for p in ("resolve", "challenge", "adjudicate", "deliver"))
    assert again["base"] == "r03" and again["outcome"] == "delivered"
