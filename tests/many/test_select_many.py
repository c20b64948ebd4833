"""``select-many``: one decision per task, written to picks.jsonl as it finishes, resumed on a rerun.

Model calls go to the scripted test double (it grades by the word GOOD in a response), over a real
store; the CLI runs in process (typer's CliRunner).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from tests.support.scripted_model import ScriptedScoreModel, registered_scheme
from veriscale import schemas
from veriscale.cli import app
from veriscale.data.pool import load_pool
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.many.picks_file import PicksFile
from veriscale.many.select_many import aselect_many, jobs_of, select_many
from veriscale.selection.settings import SelectionSettings
from veriscale.verify.reward import Verifier

GUARD_S = 600  # a hang guard only: the waits below end on events
PICK = Draft202012Validator(schemas.load("pick"))


def _write_pool(path: Path, tasks: tuple[str, ...] = ("t1", "t2", "t3"), runs: int = 3) -> Path:
    """``runs`` chat runs of each task; run 1 of each is the GOOD one."""
    lines = []
    for task in tasks:
        for r in range(runs):
            answer = f"answer {r} of {task}" + (" GOOD" if r == 1 else "")
            lines.append({"id": f"{task}-r{r}", "task_id": task, "messages": [
                {"role": "user", "content": f"Task {task}: write the answer."},
                {"role": "assistant", "content": answer}]})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _run(pool: Path, out: Path, model: ScriptedScoreModel, store: Store, **kw):
    verifier = Verifier(model, store=store, criteria="general")
    return select_many(jobs_of(load_pool([pool]), tasks=kw.pop("tasks", None), limit=kw.pop("limit", None)),
                       verifier=verifier, settings=SelectionSettings(method="round_robin"),
                       picks=PicksFile(out), **kw)


def test_every_task_gets_one_line_with_its_good_run_picked(tmp_path: Path) -> None:
    pool, out = _write_pool(tmp_path / "pool.jsonl"), tmp_path / "picks.jsonl"
    report = _run(pool, out, ScriptedScoreModel(), Store.open(tmp_path / "s.sqlite3"))
    lines = _lines(out)
    assert sorted(line["task"] for line in lines) == ["t1", "t2", "t3"]
    for line in lines:
        PICK.validate(line)
        assert line["pick"] == f"{line['task']}-r1" and line["error"] is None and line["ranking"][0] == line["pick"]
        assert line["cost"]["model_calls"] > 0 and line["run_id"] is not None
    assert report.decided == 3 and report.failed == 0 and not report.skipped


def test_a_failing_task_gets_an_error_line_not_a_pick_and_a_rerun_decides_only_it(tmp_path: Path) -> None:
    pool, out = _write_pool(tmp_path / "pool.jsonl"), tmp_path / "picks.jsonl"
    store = Store.open(tmp_path / "s.sqlite3")
    model = ScriptedScoreModel()
    model.fail_when = lambda req: "Task t2" in req.messages[-1].content
    first = _run(pool, out, model, store)
    by_task = {line["task"]: line for line in _lines(out)}
    assert first.failed == 1 and by_task["t2"]["pick"] is None and "scripted failure" in by_task["t2"]["error"]
    assert by_task["t1"]["pick"] == "t1-r1" and by_task["t3"]["pick"] == "t3-r1"
    PICK.validate(by_task["t2"])

    model.fail_when = lambda req: False
    before = len(model.calls)
    again = _run(pool, out, model, store)
    asked = [req.messages[-1].content for req in model.calls[before:]]
    assert asked and all("Task t2" in text for text in asked)  # the decided tasks were not asked again
    assert sorted(again.skipped) == ["t1", "t3"] and again.decided == 1
    lines = _lines(out)
    assert len(lines) == 3 and {line["task"]: line["pick"] for line in lines}["t2"] == "t2-r1"


def test_a_stopped_run_resumes_without_repeating_a_committed_call(tmp_path: Path) -> None:
    pool, out = _write_pool(tmp_path / "pool.jsonl"), tmp_path / "picks.jsonl"
    store = Store.open(tmp_path / "s.sqlite3")
    model = ScriptedScoreModel()

    class Stop(Exception):
        pass

    def stop_after_first(record) -> None:
        raise Stop(record.task)

    with pytest.raises(Stop):
        _run(pool, out, model, store, on_done=stop_after_first)
    assert len(_lines(out)) == 1  # the first decision was on disk before the run stopped
    answered = {repr(req) for req in model.calls}
    before = len(model.calls)
    again = _run(pool, out, model, store)
    assert len(again.skipped) == 1 and again.decided == 2
    assert not {repr(req) for req in model.calls[before:]} & answered  # committed calls came from the store
    assert sorted(line["task"] for line in _lines(out)) == ["t1", "t2", "t3"]


def test_a_cut_off_last_line_is_decided_again_and_a_bad_middle_line_is_refused(tmp_path: Path) -> None:
    pool, out = _write_pool(tmp_path / "pool.jsonl"), tmp_path / "picks.jsonl"
    store = Store.open(tmp_path / "s.sqlite3")
    _run(pool, out, ScriptedScoreModel(), store, tasks=["t1"])
    good = out.read_text()
    out.write_text(good + '{"schema": "veriscale.pick/1", "task": "t2", "pi')  # a kill while writing
    report = _run(pool, out, ScriptedScoreModel(), store)
    assert report.skipped == ["t1"] and report.decided == 2
    assert any("line 2 was cut off" in n for n in report.notes)
    assert len(_lines(out)) == 3

    out.write_text("not json\n" + good)
    with pytest.raises(UserError, match="line 1 is not a picks line"):
        _run(pool, out, ScriptedScoreModel(), store)


def test_tasks_and_limit_choose_the_decisions_and_unknown_tasks_are_named(tmp_path: Path) -> None:
    pool = load_pool([_write_pool(tmp_path / "pool.jsonl", tasks=("a", "b", "c", "d"))])
    assert [j.key for j in jobs_of(pool, limit=2)] == ["a", "b"]
    assert [j.key for j in jobs_of(pool, tasks=["d", "b"])] == ["b", "d"]
    assert [j.key for j in jobs_of(pool, tasks=["d", "b"], limit=1)] == ["b"]
    with pytest.raises(UserError, match="names 'zz', which the pool does not hold: the pool's tasks are 'a', 'b'"):
        jobs_of(pool, tasks=["zz"])
    with pytest.raises(UserError, match="below 1"):
        jobs_of(pool, limit=0)


def test_runs_that_carry_no_task_are_refused_naming_the_file(tmp_path: Path) -> None:
    for name in ("a.md", "b.md"):
        (tmp_path / name).write_text(f"answer {name}\n")
    with pytest.raises(UserError, match=r"a\.md' has no task"):
        jobs_of(load_pool([tmp_path / "a.md", tmp_path / "b.md"]))


class TwoTasksAtOnceWitness(ScriptedScoreModel):
    """TEST DOUBLE: the scripted model, awaited natively; each call waits until calls of two different
    tasks have been in flight at once (a run that decides one task at a time never gets there)."""

    concurrency = 64

    def __init__(self) -> None:
        super().__init__()
        self.in_flight: dict[str, int] = {}
        self.both: asyncio.Event | None = None

    async def ascore(self, request):
        self.both = self.both or asyncio.Event()
        task = request.messages[-1].content.split("Task ", 1)[1].split(":", 1)[0]
        self.in_flight[task] = self.in_flight.get(task, 0) + 1
        try:
            if sum(1 for n in self.in_flight.values() if n) >= 2:
                self.both.set()
            await asyncio.wait_for(self.both.wait(), GUARD_S)
            return self.score(request)
        finally:
            self.in_flight[task] -= 1


def test_tasks_at_once_overlap_and_each_line_counts_only_its_own_calls(tmp_path: Path) -> None:
    pool, out = _write_pool(tmp_path / "pool.jsonl", tasks=("t1", "t2")), tmp_path / "picks.jsonl"
    model = TwoTasksAtOnceWitness()
    verifier = Verifier(model, store=Store.open(tmp_path / "s.sqlite3"), criteria="general")
    report = asyncio.run(aselect_many(jobs_of(load_pool([pool])), verifier=verifier,
                                      settings=SelectionSettings(method="round_robin"), picks=PicksFile(out),
                                      at_once=2))
    assert model.both is not None and model.both.is_set()
    calls = [r.cost["model_calls"] for r in report.records]
    assert calls[0] == calls[1] and sum(calls) == verifier.usage.model_calls == len(model.calls)


@pytest.fixture()
def scripted_scheme():
    failing = ScriptedScoreModel()
    failing.fail_when = lambda req: "Task t3" in req.messages[-1].content
    with registered_scheme("scripted", lambda uri: ScriptedScoreModel(), ("scripted",)), \
            registered_scheme("scripted-t3-down", lambda uri: failing, ("scripted-t3-down",)):
        yield


def test_the_command_writes_picks_resumes_and_exits_3_while_a_task_has_no_pick(tmp_path: Path,
                                                                                scripted_scheme) -> None:
    pool, out = _write_pool(tmp_path / "pool.jsonl"), tmp_path / "picks.jsonl"
    store = ["--store", str(tmp_path / "s.sqlite3")]
    runner = CliRunner()
    down = runner.invoke(app, ["select-many", str(pool), "-o", str(out), "--model", "scripted-t3-down", *store,
                               "--method", "round_robin", "--json"])
    assert down.exit_code == 3, down.output
    assert "1 task(s) have no pick (the first, t3" in down.stderr
    summary = json.loads(down.stdout)
    Draft202012Validator(schemas.load("select-many")).validate(summary)
    assert (summary["decided"], summary["failed"], summary["failures"][0]["task"]) == (2, 1, "t3")

    up = runner.invoke(app, ["select-many", str(pool), "-o", str(out), "--model", "scripted", *store,
                             "--method", "round_robin", "--json"])
    assert up.exit_code == 0, up.output
    assert (json.loads(up.stdout)["decided"], json.loads(up.stdout)["skipped"]) == (1, 2)
    assert {line["task"]: line["pick"] for line in _lines(out)} == {"t1": "t1-r1", "t2": "t2-r1", "t3": "t3-r1"}

    for result, tasks in ((down, ["t1", "t2", "t3"]), (up, ["t3"])):  # each decision a run under its select-many
        shown = runner.invoke(app, ["runs", "show", str(json.loads(result.stdout)["run_id"]), *store])
        assert sorted(t["task"] for t in json.loads(shown.stdout)["tasks"]) == tasks, shown.output


def test_the_command_refuses_a_folder_as_output_in_one_sentence(tmp_path: Path, scripted_scheme) -> None:
    pool = _write_pool(tmp_path / "pool.jsonl")
    result = CliRunner().invoke(app, ["select-many", str(pool), "-o", str(tmp_path), "--model", "scripted"])
    assert result.exit_code == 2 and "is a folder: give a file path for the picks" in result.stderr


def test_a_served_select_many_job_decides_every_task_as_child_runs(scripted_scheme, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    from tests.support.serve_in_process import serve_while, wait_job

    folder = tmp_path / "pools"
    folder.mkdir()
    pool, store = _write_pool(folder / "pool.jsonl"), tmp_path / "s.sqlite3"

    def one_job(url: str) -> dict:
        job = httpx.post(url + "/api/jobs", json={"kind": "select_many", "params": {
            "paths": [str(pool)], "tasks": ["t1", "t3"], "method": "round_robin"}}).json()
        return wait_job(url, job)

    job = serve_while(monkeypatch, [], ["--allow-dir", str(folder), "--model", "scripted", "--store", str(store)],
                      one_job)
    assert job["status"] == "done", job
    opened = Store.open(store)
    run = opened.run(job["run_id"])
    assert run is not None and run.command == "select-many"
    assert {p["task"]: p["pick"] for p in run.result["picks"]} == {"t1": "t1-r1", "t3": "t3-r1"}
    for line in run.result["picks"]:
        PICK.validate(line)
    assert sorted(c.args["task"] for c in opened.child_runs(run.id)) == ["t1", "t3"]


def test_a_served_select_many_job_with_a_failed_task_fails_naming_it(scripted_scheme, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    from tests.support.serve_in_process import serve_while, wait_job

    folder = tmp_path / "pools"
    folder.mkdir()
    pool = _write_pool(folder / "pool.jsonl")

    def one_job(url: str) -> dict:
        job = httpx.post(url + "/api/jobs", json={"kind": "select_many", "params": {
            "paths": [str(pool)], "method": "round_robin"}}).json()
        return wait_job(url, job)

    job = serve_while(monkeypatch, [], ["--allow-dir", str(folder), "--model", "scripted-t3-down", "--store",
                                        str(tmp_path / "s.sqlite3")], one_job)
    assert job["status"] == "failed" and job["error"].startswith("1 of 3 task(s) failed: t3: "), job
