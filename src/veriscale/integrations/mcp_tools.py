"""The tools ``veriscale mcp`` serves: what each accepts (pydantic models: the tools' input schemas)
and how each runs, on the same job runners as ``veriscale serve`` (:mod:`veriscale.server.job_kinds`),
recording a store run like the CLI command of the same name and returning what its ``--json`` prints::

    params = TOOLS["select"].params.model_validate({"task": "Say hi.", "candidates": ["hi", "bye"]})
    payload = run_tool("select", params, ctx)     # ctx: a ToolContext; payload["schema"] == "veriscale.select/1"

A tool reads texts given inline, or files under the server's ``--allow-dir`` folders only
(``ctx.path``). Each runs synchronously in a worker thread (:func:`veriscale.models.cancel.in_worker`):
a cancel sets its stop flag, the gateway work under it is cancelled (its in-flight calls recorded
``cancelled``) and the run ends ``cancelled``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from veriscale.engine.run_scope import RunCancelled
from veriscale.errors import UserError, one_line, setting
from veriscale.redact import Redactor
from veriscale.server import job_kinds
from veriscale.server.job_kinds import CompareParams, PathText, ScoreParams, _TournamentParams
from veriscale.server.jobs import RunnerContext

#: runs the ``runs`` tool lists at most
MAX_RUNS = 200


class SelectToolParams(_TournamentParams):
    """``select``: candidate texts inline, or files under an allowed folder (either, not both)."""

    candidates: list[str] | None = Field(None, min_length=1, description="Candidate texts (inline).")
    paths: list[PathText] | None = Field(None, min_length=1, description="Candidate files, folders or a JSONL pool "
                                                                         "under an allowed folder.")
    task: str | None = Field(None, min_length=1, description="The task text (default: the task the runs carry).")
    task_file: PathText | None = Field(None, description="A task file under an allowed folder, instead of task.")


class StepParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str = Field("agent", description="system, user, agent, tool or environment.")
    text: str = Field("", description="What was said or done.")
    observation: str = Field("", description="What came back.")
    exit_code: int | None = None


class TrackToolParams(BaseModel):
    """``track``: a trajectory file under an allowed folder, or its steps inline."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    paths: list[PathText] | None = Field(None, min_length=1, description="Trajectory files under an allowed folder.")
    steps: list[StepParams] | None = Field(None, min_length=1, description="The run's steps inline, in order.")
    task: str | None = Field(None, min_length=1, description="The task text (default: the task the run names).")
    task_file: PathText | None = Field(None, description="A task file under an allowed folder, instead of task.")
    id: str | None = Field(None, description="Track only the run with this id (files).")
    every: int | None = Field(None, ge=1, description="Score every Nth step.")
    checkpoints: list[int] | None = Field(None, description="Score after these steps only.")


class RunsToolParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: int = Field(20, ge=1, le=MAX_RUNS, description="How many runs, newest first.")


@dataclass(kw_only=True)
class ToolContext(RunnerContext):
    """A tool call's context (the job runners' ``RunnerContext``): its stop flag and its progress."""

    stop: threading.Event = field(default_factory=threading.Event)
    on_progress: Callable[[int, int], None] = lambda done, planned: None
    redactor: Redactor = field(default_factory=Redactor)  # what leaves the store (the runs tool)

    def path(self, given: str) -> Path:
        """``given`` resolved, if it lies under an ``--allow-dir`` folder; else one sentence."""
        if not self.roots:
            raise UserError(f"'{one_line(given)[:200]}' is a path, and this server may read no folder: pass the "
                            f"text inline, or start the server with {setting('allow_dirs', 'FOLDER')}")
        try:
            return super().path(given)
        except UserError as exc:
            raise UserError(exc.template.replace("the folders GET /api/info lists",
                                                 f"the folders given to {setting('allow_dirs')}")) from None

    def start_run(self, command: str, model: str | None, args: dict[str, Any]) -> int:
        return self.open_run(command, model, {**args, "via": "mcp"})

    def check(self) -> None:
        if self.stop.is_set():
            raise RunCancelled("cancelled by the MCP client")

    def call_counter(self, planned: int) -> Callable[[Any], None]:
        """A progress callback: reports each finished call, and stops once a cancel was asked for."""
        done = 0

        def count(_outcome: Any) -> None:
            nonlocal done
            done += 1
            self.on_progress(done, planned)
            self.check()

        return count


def _ignore(*_values: Any) -> None:
    """A callback's value dropped (the callbacks here are called for what they do)."""


def _select(params: SelectToolParams, ctx: ToolContext) -> dict[str, Any]:
    from veriscale.data.model import Candidate, Task
    from veriscale.models.vision_probe import require_seen
    from veriscale.selection.inputs import default_criteria, resolve_inputs, shows_images, task_taken_from
    from veriscale.selection.select import plan_selection, run_selection
    from veriscale.selection.settings import SelectionSettings

    if (params.candidates is None) == (params.paths is None):
        raise UserError("give the candidates either as texts (candidates) or as files (paths), one of the two")
    if params.task is not None and params.task_file is not None:
        raise UserError("give the task either as text (task) or as a file (task_file), not both")
    took = None
    task: Task | None
    given_task = Task(params.task) if params.task is not None else None
    if params.task_file is not None:
        from veriscale.data.text_input import read_text_input

        given_task = Task(read_text_input(str(ctx.path(params.task_file)), "task"))
    if params.paths is not None:
        from veriscale.data.importers import load_candidates

        paths = [str(ctx.path(p)) for p in params.paths]
        if given_task is not None:
            task, candidates = given_task, load_candidates(paths)
        else:
            task, candidates = resolve_inputs(paths, None, None)  # the runs' task, or a leading TASK file
            took = task_taken_from(task, None)
        args: dict[str, Any] = {"paths": paths, "task": params.task_file}
    else:
        if len(params.candidates or []) < 2:
            raise UserError("select needs at least two candidates to pick from: give two or more texts")
        if given_task is None:
            raise UserError("inline candidates carry no task: give the task text (task) or a task file (task_file)")
        task = given_task
        candidates = [Candidate(id=f"c{i}", text=text) for i, text in enumerate(params.candidates or [])]
        args = {"candidates": len(candidates)}
    crits = job_kinds._criteria(params.criteria or default_criteria(candidates), ctx)
    settings = SelectionSettings(method=params.method, k=params.k, repeats=params.repeats, adaptive=params.adaptive,
                                 min_confidence=params.min_confidence, seed=params.seed, scale=params.scale,
                                 criteria=crits, budget=params.budget, **ctx.injection)
    verifier = settings.verifier(ctx.model, store=ctx.store, concurrency=ctx.concurrency)
    if shows_images(task, candidates):
        require_seen(verifier.executor)
    plan = plan_selection(task, candidates, verifier=verifier, settings=settings)
    run_id = ctx.start_run("select", verifier.model.uri, {**args, "method": params.method, "k": params.k,
                                                          "criteria": crits.name})
    ctx.log.record_candidates(run_id, candidates)
    count = ctx.call_counter(plan.model_calls_planned if plan.budget else
                             plan.judgements_planned * plan.calls_per_judgement)
    sel = run_selection(plan, verifier=verifier, on_progress=lambda done, planned: count(None),
                        on_step=lambda step: _ignore(ctx.log.emit(run_id, "budget", step)))
    payload = {**sel.to_dict(), "criteria_set": crits.name}
    return {**payload, "task_taken_from": took} if took else payload


def _track(params: TrackToolParams, ctx: ToolContext) -> dict[str, Any]:
    if (params.paths is None) == (params.steps is None):
        raise UserError("give the trajectory either as files (paths) or as steps inline (steps), one of the two")
    if params.task is not None and params.task_file is not None:
        raise UserError("give the task either as text (task) or as a file (task_file), not both")
    if params.paths is not None and params.task is None:
        return job_kinds.run_track(job_kinds.TrackParams(paths=params.paths, task=params.task_file, id=params.id,
                                                         every=params.every, checkpoints=params.checkpoints), ctx)
    from veriscale.data.importers import load_candidates
    from veriscale.data.model import Candidate, Step, Trajectory
    from veriscale.data.text_input import read_text_input
    from veriscale.progress.checkpoints import resolve_checkpoints
    from veriscale.progress.events import EventWatch
    from veriscale.progress.offline_track import track
    from veriscale.progress.progress_judge import ProgressJudge
    from veriscale.progress.voc import voc_by_outcome

    if params.paths is not None:  # files with the task given as text
        cands = [c for p in params.paths for c in load_candidates([str(ctx.path(p))])]
        cands = [c for c in cands if c.trajectory is not None and c.trajectory.steps
                 and (params.id is None or c.id == params.id)]
        if not cands:
            raise UserError("the paths hold no run with steps" + (f" and id '{params.id}'" if params.id else "")
                            + ": progress is scored on a trajectory's steps")
    else:
        steps = [Step(role=s.role, text=s.text, observation=s.observation, exit_code=s.exit_code)
                 for s in params.steps or []]
        cands = [Candidate(id=params.id or "inline", trajectory=Trajectory(steps=steps))]
    task = params.task if params.task is not None else (
        read_text_input(str(ctx.path(params.task_file)), "task") if params.task_file else None)
    if task is None and params.steps is not None:
        raise UserError("inline steps carry no task: give the task text (task) or a task file (task_file)")
    judge = ProgressJudge(ctx.model, store=ctx.store, concurrency=ctx.concurrency)
    run_id = ctx.start_run("track", judge.model.uri, {"runs": len(cands), "every": params.every,
                                                      "steps": "inline" if params.steps else None})
    plans = [(c, resolve_checkpoints(len(c.trajectory.steps), params.checkpoints, params.every))
             for c in cands if c.trajectory is not None]
    count = ctx.call_counter(sum(len(points) for _, points in plans) * len(judge.repeats))
    curves = []
    for cand, chosen in plans:
        assert cand.trajectory is not None
        ctx.log.record_steps(run_id, cand.id, cand.trajectory.steps, start=0)
        feed = judge.point_feed(ctx.log.point_emitter(run_id, cand.id))
        curves.append(track(task, cand, chosen, judge=judge, watch=EventWatch(),
                            progress=lambda outcome: _ignore(feed(outcome), count(outcome))))
        ctx.log.emit_events(run_id, cand.id, curves[-1].events)
    labelled = [(c.voc, bool(c.outcome)) for c in curves if c.outcome is not None]
    return {"curves": [c.to_dict() for c in curves], "voc_by_outcome": voc_by_outcome(labelled) if labelled else None}


def _runs(params: RunsToolParams, ctx: ToolContext) -> dict[str, Any]:
    from veriscale.schemas.output import with_schema
    from veriscale.engine.run_liveness import settle_dead_runs
    from veriscale.engine.run_summary import run_summary

    settle_dead_runs(ctx.store)
    runs = [{"id": r.id, "command": r.command, "model": r.model, "status": r.status, "created_at": r.created_at,
             "args": r.args, "summary": run_summary(r)} for r in ctx.store.runs(params.limit)]
    return {"runs": ctx.redactor(with_schema(runs, "runs-list"))}


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its input model, its runner, the ``--json`` kind it returns (None: ``runs``, a list
    of ``runs-list`` items under ``"runs"``), whether it records a run, and what it does."""

    params: type[BaseModel]
    run: Callable[[Any, ToolContext], dict[str, Any]]
    kind: str | None
    records_run: bool
    description: str


TOOLS: dict[str, ToolSpec] = {
    "score": ToolSpec(ScoreParams, job_kinds.run_score, "score", True,
                      "Score one response to a task: reward in [0, 1] and per-criterion rewards (the fields of "
                      "`veriscale score --json`)."),
    "compare": ToolSpec(CompareParams, job_kinds.run_compare, "compare", True,
                        "Compare two responses to a task in one context: both rewards and P(A beats B) (the fields "
                        "of `veriscale compare --json`)."),
    "select": ToolSpec(SelectToolParams, _select, "select", True,
                       "Pick the best of N responses or agent runs (texts inline, or files under the allowed "
                       "folders): ranking, confidence, reason (the fields of `veriscale select --json`)."),
    "track": ToolSpec(TrackToolParams, _track, "track", True,
                      "Score an agent run's progress step by step (a trajectory file under the allowed folders, or "
                      "its steps inline): the curve and its VOC (the fields of `veriscale track --json`)."),
    "runs": ToolSpec(RunsToolParams, _runs, None, False,
                     "Recent runs in the store, newest first, each with its verdict or error (the items of "
                     "`veriscale runs list --json`)."),
}


def run_tool(name: str, params: BaseModel, ctx: ToolContext) -> dict[str, Any]:
    """Run tool ``name`` (validated ``params``) to its end and return its payload with ``schema`` and,
    for a recorded run, ``run_id``; its run ends ``ok``, ``failed`` or ``cancelled`` (a set stop flag)."""
    from veriscale.schemas.output import cli_data, finite_data, with_schema
    from veriscale.models.cancel import Stopped

    spec = TOOLS[name]
    with ctx.runs:  # whatever escapes still ends the tool's run
        try:
            result = spec.run(params, ctx)
        except Stopped:
            raise RunCancelled("cancelled by the MCP client") from None
        if ctx.run is not None:
            failed = bool(result.get("failed") or result.get("errors")
                          or any(c.get("failed") for c in result.get("curves") or []))
            ctx.run.finish("failed" if failed else "ok", result)
    payload = {**result, "run_id": ctx.run_id} if ctx.run is not None else result
    data, _ = finite_data(cli_data(with_schema(payload, spec.kind)))
    return dict(data)
