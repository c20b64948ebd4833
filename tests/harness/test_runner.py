"""`run_tasks` over several tasks and the `veriscale harness run` command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.scripted_chat import ScriptedChat, call, say
from veriscale.cli import app
from veriscale.errors import UserError
from veriscale.harness.jail.sandbox import JAIL_OFF_MESSAGE
from veriscale.harness.protocol.protocol_runner import RunOptions, run_tasks


def _good_scripts(base: str) -> dict:
    return {
        "resolve": [call("write", path="ledger.json", content=json.dumps({"entries": []})), say("done")],
        "challenge": [call("write", path="ledger.json", content=json.dumps({"entries": []})), say("done")],
        "adjudicate": [call("write", path="finish.json", content=json.dumps(
            {"base": base, "revisions": [], "unresolved": []})), say("done")],
    }


class PerTaskChat(ScriptedChat):
    """Routes by task folder as well as phase, so concurrent tasks keep their own scripts."""

    def __init__(self, per_task: dict[str, dict]) -> None:
        super().__init__({})
        self.per_task = {task: ScriptedChat(scripts) for task, scripts in per_task.items()}

    def chat(self, messages, **kwargs):
        task = next(name for name in self.per_task if f"/{name}.runs/" in messages[0]["content"])
        return self.per_task[task].chat(messages, **kwargs)


@pytest.fixture()
def two_tasks(materialized: dict, tmp_path: Path) -> list[Path]:
    tasks = []
    for name in ("quarterly_report", "data_cleanup"):
        shutil.copytree(materialized[name]["dir"], tmp_path / name)
        tasks.append(tmp_path / name)
    return tasks


def test_many_tasks_run_concurrently_a_failing_one_does_not_stop_the_others(two_tasks: list[Path], tmp_path: Path) -> None:
    chat = PerTaskChat({"quarterly_report": _good_scripts("r02"), "data_cleanup": _good_scripts("r99")})
    lines: list[str] = []
    missing = tmp_path / "not_a_task"
    options = RunOptions(model_uri="scripted", contract="pick-only", concurrency=2, no_jail=True,
                         run_id="batch", max_steps=5, skills_dirs=[])
    summary = run_tasks([*two_tasks, missing], options, backend=chat, log=lines.append)
    by_task = {t["task"]: t for t in summary["tasks"]}
    assert by_task["quarterly_report"]["outcome"] == "delivered"
    assert by_task["data_cleanup"]["outcome"] == "no base chosen"  # r99 is no rollout, even after the nudge
    assert by_task["not_a_task"]["outcome"] == "error" and "does not exist" in by_task["not_a_task"]["error"]
    assert summary["failed"] == 2
    run_dir = tmp_path / "quarterly_report.runs" / "batch"
    assert json.loads((run_dir / "outcome.json").read_text())["base"] == "r02"
    assert json.loads((run_dir / "phases" / "resolve.json").read_text())["calls"] == 2
    assert lines and all(line.startswith(f"[{JAIL_OFF_MESSAGE}]") for line in lines)


def test_runs_dir_keeps_runs_in_one_place(two_tasks: list[Path], tmp_path: Path) -> None:
    chat = PerTaskChat({"quarterly_report": _good_scripts("r01")})
    options = RunOptions(model_uri="scripted", contract="pick-only", no_jail=True, run_id="x",
                         runs_root=tmp_path / "runs", skills_dirs=[])
    summary = run_tasks(two_tasks[:1], options, backend=chat)
    assert summary["tasks"][0]["run_dir"] == str((tmp_path / "runs" / "quarterly_report" / "x").resolve())


@pytest.mark.parametrize("bad, message", [
    ({"contract": "vote"}, "unknown contract"),
    ({"concurrency": 0}, "below 1"),
    ({"phase_timeout_s": 0}, "not positive"),
    ({"run_id": "../x"}, "plain folder name"),
])
def test_bad_options_are_user_errors(two_tasks: list[Path], bad: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        run_tasks(two_tasks, RunOptions(model_uri="scripted", no_jail=True, **bad), backend=ScriptedChat({}))


def test_cli_run_reports_a_bad_model_uri_in_one_line(two_tasks: list[Path]) -> None:
    result = CliRunner().invoke(app, ["harness", "run", str(two_tasks[0]), "--model", "nonsense:x", "--no-jail"])
    assert result.exit_code == 2
    assert "unknown model URI" in result.output and "Traceback" not in result.output


def test_a_harness_run_is_a_run_in_the_store_with_its_tasks_phases_and_calls(two_tasks: list[Path], tmp_path: Path) -> None:
    chat = PerTaskChat({"quarterly_report": _good_scripts("r02")})
    store = tmp_path / "store.sqlite3"
    options = RunOptions(model_uri="scripted", contract="pick-only", no_jail=True, run_id="stored",
                         skills_dirs=[], store_path=store)
    summary = run_tasks(two_tasks[:1], options, backend=chat)
    listed = CliRunner().invoke(app, ["runs", "list", "--store", str(store), "--json"])
    assert listed.exit_code == 0, listed.output
    (run,) = json.loads(listed.stdout)
    assert run["id"] == summary["store_run"] and run["command"] == "harness run" and "1 task" in run["summary"]
    shown = json.loads(CliRunner().invoke(app, ["runs", "show", str(run["id"]), "--store", str(store), "--calls"]).stdout)
    (task,) = shown["tasks"]
    assert task["task"].endswith("quarterly_report") and task["phases"]["resolve"]["status"] == "completed"
    chat_calls = [c for c in shown["calls"] if c["kind"] == "chat"]
    assert chat_calls and {c["label"] for c in chat_calls} >= {"resolve", "challenge", "adjudicate"}
    assert task["cost"]["calls"] == len(chat_calls) == shown["cost"]["calls"]
