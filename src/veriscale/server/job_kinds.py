"""The jobs ``veriscale serve`` runs: what each accepts (pydantic models, in the OpenAPI schema)
and how it runs on the gateway, recording a store run like the CLI command of the same name.

    job = JobRequest.model_validate({"kind": "select", "params": {"paths": ["/data/pool.jsonl"]}})
    result = run_job(job.kind, job.params, ctx)      # ctx: a jobs.JobContext

Paths in params must lie under the server's ``--allow-dir`` roots (``ctx.path``); a job reads
nothing else but the store. The injection settings (``injection_detect``, ``injection_mitigation``,
``injection_policy``) are the server's, resolved like every setting (``ctx.injection``).
"""

from __future__ import annotations

from typing import Annotated, Any, Callable, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from veriscale.errors import UserError


def _path(value: str) -> str:
    if "\x00" in value:
        raise ValueError("holds a NUL character, which no path has")
    return value


#: A path a job reads: text without NUL characters (pydantic itself refuses lone surrogates in any text).
PathText = Annotated[str, AfterValidator(_path)]


def _known(check: Callable[[str], Any]) -> Callable[[Any], Any]:
    """A validator from a checker that raises UserError: the job is refused at submit (422 naming the
    field), not when it runs."""
    def validate(value: Any) -> Any:
        if value is not None:
            try:
                check(value)
            except UserError as exc:
                raise ValueError(str(exc)) from None
        return value

    return validate


def _scale(value: str) -> None:
    from veriscale.verify.scale import parse_scale

    parse_scale(value)


def _criteria_name(value: str) -> None:
    """A built-in set; a Markdown file (a path) is checked against the allowed folders at submit."""
    from veriscale.verify.criteria import BUILTIN

    if not is_criteria_file(value) and value not in BUILTIN:
        raise UserError(f"criteria '{value}' is neither a built-in set ({', '.join(BUILTIN)}) nor a .md file: give one "
                        "of those, or the path of a criteria file under an allowed folder")


def _method(value: str) -> None:
    from veriscale.selection.settings import METHODS

    if value not in METHODS:
        raise UserError(f"unknown selection method '{value}': use one of {', '.join(METHODS)}")


def _budget(value: str) -> None:
    from veriscale.selection.budget.form import parse_budget

    parse_budget(value)


def _contract(value: str) -> None:
    from veriscale.harness.protocol.session_records import CONTRACTS

    if value not in CONTRACTS:
        raise UserError(f"unknown contract '{value}': use one of {', '.join(CONTRACTS)}")


def _executor(value: str) -> None:
    from veriscale.harness.sessions.executors import EXECUTORS

    if value not in EXECUTORS:
        raise UserError(f"unknown executor '{value}': use one of {', '.join(EXECUTORS)}")


def is_criteria_file(value: str) -> bool:
    """Whether a ``criteria`` value names a Markdown file (a path) rather than a built-in set."""
    return value.endswith(".md") or "/" in value


Scale = Annotated[str, AfterValidator(_known(_scale))]
Criteria = Annotated[str, AfterValidator(_path), AfterValidator(_known(_criteria_name))]


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


#: one image: a data URL (data:image/png;base64,...) or a file under an allowed folder
ImageText = Annotated[str, Field(min_length=1, description="A data URL (data:image/png;base64,...) or an image file "
                                                          "under an allowed folder.")]
_IMAGES_DOC = "Images shown after each section's text, in order (a vision model; see docs/VISION.md)."


class ScoreParams(_Params):
    task: str = Field(min_length=1, description="The task text.")
    candidate: str = Field(min_length=1, description="The response to score.")
    criteria: Criteria = Field("general", description="A built-in criteria set, or a Markdown file under an allowed folder.")
    scale: Scale = "letters"
    repeats: int | None = Field(None, ge=1, le=32)
    images: dict[Literal["task", "candidate"], list[ImageText]] | None = Field(None, description=_IMAGES_DOC)


class CompareParams(_Params):
    task: str = Field(min_length=1)
    a: str = Field(min_length=1, description="Candidate A.")
    b: str = Field(min_length=1, description="Candidate B.")
    criteria: Criteria = "general"
    scale: Scale = "letters"
    repeats: int | None = Field(None, ge=1, le=32)
    images: dict[Literal["task", "a", "b"], list[ImageText]] | None = Field(None, description=_IMAGES_DOC)


class _TournamentParams(_Params):
    """What a selection runs and how it judges (``select`` and ``select_many`` jobs)."""

    method: Annotated[str, AfterValidator(_known(_method))] = "ppt"
    k: int = Field(2, ge=1, le=64, description="PPT pivots.")
    criteria: Criteria | None = None
    repeats: int | None = Field(None, ge=1, le=32)
    adaptive: bool = True
    min_confidence: float = Field(0.9, gt=0, le=1)
    seed: int = Field(0, ge=0, lt=2 ** 63)
    scale: Scale = "letters"
    budget: Annotated[str | None, AfterValidator(_known(_budget))] = Field(None, max_length=64, description="What a decision may spend: calls=N or tokens=N (cache hits are free).")


class SelectParams(_TournamentParams):
    paths: list[PathText] = Field(min_length=1, description="Candidate files, folders or a JSONL pool, under an allowed folder.")
    task: PathText | None = Field(None, description="A task file (default: the task the runs carry).")


class SelectManyParams(_TournamentParams):
    paths: list[PathText] = Field(min_length=1, description="Pools (JSONL, folders) whose runs carry their task, under an allowed folder.")
    tasks: list[str] | None = Field(None, description="Only these task ids (default: every task of the pool).")
    limit: int | None = Field(None, ge=1, description="At most the first N tasks.")
    tasks_at_once: int | None = Field(None, ge=1, le=64, description="Tasks decided at once (default: 1 on the embedded model, 4 on servers).")


class TrackParams(_Params):
    paths: list[PathText] = Field(min_length=1, description="Trajectory files under an allowed folder.")
    task: PathText | None = Field(None, description="A task file (default: the task the run names).")
    id: str | None = Field(None, description="Track only the run with this id.")
    every: int | None = Field(None, ge=1)
    checkpoints: list[int] | None = None


class HarnessParams(_Params):
    tasks: list[PathText] = Field(min_length=1, description="Materialised task folders under an allowed folder.")
    contract: Annotated[str, AfterValidator(_known(_contract))] = "artifact"
    executor: Annotated[str, AfterValidator(_known(_executor))] = "builtin"
    max_steps: int = Field(30, ge=1, le=500)
    phase_timeout_s: float = Field(900.0, gt=0)


class _Job(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt top-level field is refused, not dropped


class ScoreJob(_Job):
    kind: Literal["score"]
    params: ScoreParams


class CompareJob(_Job):
    kind: Literal["compare"]
    params: CompareParams


class SelectJob(_Job):
    kind: Literal["select"]
    params: SelectParams


class SelectManyJob(_Job):
    kind: Literal["select_many"]
    params: SelectManyParams


class TrackJob(_Job):
    kind: Literal["track"]
    params: TrackParams


class HarnessJob(_Job):
    kind: Literal["harness"]
    params: HarnessParams


JobRequest = Annotated[Union[ScoreJob, CompareJob, SelectJob, SelectManyJob, TrackJob, HarnessJob],
                      Field(discriminator="kind")]
PARAMS: dict[str, type[_Params]] = {"score": ScoreParams, "compare": CompareParams, "select": SelectParams,
                                    "select_many": SelectManyParams, "track": TrackParams, "harness": HarnessParams}


def _criteria(name: str, ctx: Any):
    from veriscale.verify.criteria import load_criteria

    if is_criteria_file(name):
        return load_criteria(str(ctx.path(name)))
    return load_criteria(name)


def _verifier(params: ScoreParams | CompareParams, ctx: Any):
    from veriscale.verify.reward import Verifier

    detect_and_mitigation = {k: v for k, v in ctx.injection.items() if k != "injection_policy"}
    return Verifier(ctx.model, store=ctx.store, scale=params.scale, criteria=_criteria(params.criteria, ctx),
                    repeats=params.repeats, concurrency=ctx.concurrency, **detect_and_mitigation)


def _images(given: dict[str, list[str]] | None, verifier: Any, ctx: Any) -> dict[str, Any] | None:
    """A job's images read (a file only under an allowed folder), and the model asked once whether it sees
    them (as the CLI: one that does not is refused before any verdict)."""
    if not given or not any(given.values()):
        return None
    from veriscale.data.images import ImageRef, load_images
    from veriscale.models.vision import require_vision
    from veriscale.models.vision_probe import require_seen

    shown = {what: load_images([ImageRef(x) if x.startswith("data:") else ImageRef(str(ctx.path(x)), label=x)
                                for x in refs]) for what, refs in given.items()}
    require_vision(verifier.model, True)
    require_seen(verifier.executor)
    return shown


def run_score(params: ScoreParams, ctx: Any) -> dict[str, Any]:
    verifier = _verifier(params, ctx)
    images = _images(params.images, verifier, ctx)
    ctx.start_run("score", verifier.model.uri, {"criteria": params.criteria})  # current: calls link to it
    planned = len(verifier.plan_score(params.task, params.candidate, images)[0])
    return verifier.score(params.task, params.candidate, progress=ctx.call_counter(planned), images=images).to_dict()


def run_compare(params: CompareParams, ctx: Any) -> dict[str, Any]:
    verifier = _verifier(params, ctx)
    images = _images(params.images, verifier, ctx)
    ctx.start_run("compare", verifier.model.uri, {"criteria": params.criteria})
    planned = len(verifier.plan_compare(params.task, params.a, params.b, images=images)[0])
    return verifier.compare(params.task, params.a, params.b, progress=ctx.call_counter(planned),
                            images=images).to_dict()


def run_select(params: SelectParams, ctx: Any) -> dict[str, Any]:
    from veriscale.models.vision_probe import require_seen
    from veriscale.selection.inputs import default_criteria, resolve_inputs, shows_images, task_taken_from
    from veriscale.selection.select import plan_selection, run_selection
    from veriscale.selection.settings import SelectionSettings

    paths = [str(ctx.path(p)) for p in params.paths]
    task, candidates = resolve_inputs(paths, str(ctx.path(params.task)) if params.task else None, None)
    crits = _criteria(params.criteria or default_criteria(candidates), ctx)
    settings = SelectionSettings(method=params.method, k=params.k, repeats=params.repeats, adaptive=params.adaptive,
                                 min_confidence=params.min_confidence, seed=params.seed, scale=params.scale,
                                 criteria=crits, budget=params.budget,
                                 **ctx.injection)  # the server's injection settings
    verifier = settings.verifier(ctx.model, store=ctx.store, concurrency=ctx.concurrency)
    if shows_images(task, candidates):
        require_seen(verifier.executor)  # as the CLI: a model that does not see them is refused before any verdict
    plan = plan_selection(task, candidates, verifier=verifier, settings=settings)
    run_id = ctx.start_run("select", verifier.model.uri, {"paths": paths, "task": params.task, "method": params.method,
                                                          "k": params.k, "criteria": crits.name})
    ctx.log.record_candidates(run_id, candidates)
    count = ctx.call_counter(plan.judgements_planned * plan.calls_per_judgement)
    result = run_selection(plan, verifier=verifier, on_progress=lambda done, planned: count(None),
                           on_step=lambda step: ctx.log.emit(run_id, "budget", step)).to_dict()
    took = task_taken_from(task, params.task)
    return {**result, "task_taken_from": took} if took else result


def run_select_many(params: SelectManyParams, ctx: Any) -> dict[str, Any]:
    """``select-many`` as a job: each decision a run under the job's, the picks in its result (a rerun
    of the same job takes every call it committed from the store)."""
    from veriscale.data.pool import load_pool
    from veriscale.many.picks_file import PicksList
    from veriscale.many.select_many import default_at_once, jobs_of, select_many
    from veriscale.selection.inputs import default_criteria
    from veriscale.selection.settings import SelectionSettings

    paths = [str(ctx.path(p)) for p in params.paths]
    jobs = jobs_of(load_pool(paths), tasks=params.tasks, limit=params.limit)
    crits = _criteria(params.criteria or default_criteria([c for j in jobs for c in j.candidates]), ctx)
    settings = SelectionSettings(method=params.method, k=params.k, repeats=params.repeats, adaptive=params.adaptive,
                                 min_confidence=params.min_confidence, seed=params.seed, scale=params.scale,
                                 criteria=crits, budget=params.budget, **ctx.injection)
    verifier = settings.verifier(ctx.model, store=ctx.store, concurrency=ctx.concurrency)
    at_once = params.tasks_at_once or default_at_once(verifier.model)
    run_id = ctx.start_run("select-many", verifier.model.uri, {"paths": paths, "tasks": len(jobs),
                                                               "method": params.method, "k": params.k,
                                                               "criteria": crits.name, "tasks_at_once": at_once})
    picks = PicksList()
    done = 0

    def finished(_record: Any) -> None:
        nonlocal done
        done += 1
        ctx.log.emit(run_id, "tasks", {"done": done, "planned": len(jobs)})
        ctx.check()  # a cancel stops the job between decisions

    report = select_many(jobs, verifier=verifier, settings=settings, picks=picks, at_once=at_once, parent=run_id,
                         on_done=finished, on_call=lambda _outcome: ctx.check())
    return {**report.to_dict(), "picks": [r.to_dict() for r in picks.records]}


def run_track(params: TrackParams, ctx: Any) -> dict[str, Any]:
    from veriscale.data.importers import load_candidates
    from veriscale.data.text_input import read_text_input
    from veriscale.progress.checkpoints import resolve_checkpoints
    from veriscale.progress.events import EventWatch
    from veriscale.models.vision_probe import require_seen
    from veriscale.progress.frame_steps import shows_frames, with_frame_steps
    from veriscale.progress.progress_judge import ProgressJudge
    from veriscale.progress.offline_track import track
    from veriscale.progress.voc import voc_by_outcome

    paths = [ctx.path(p) for p in params.paths]
    cands = [with_frame_steps(c) for p in paths for c in load_candidates([str(p)])]
    cands = [c for c in cands if c.trajectory is not None and c.trajectory.steps]
    if params.id is not None:
        cands = [c for c in cands if c.id == params.id]
    if not cands:
        raise UserError("the paths hold no run with steps or frames" + (f" and id '{params.id}'" if params.id else "")
                        + ": progress is scored on a trajectory's steps, or on a video's or a frame folder's frames")
    task = read_text_input(str(ctx.path(params.task)), "task") if params.task else None
    judge = ProgressJudge(ctx.model, store=ctx.store, concurrency=ctx.concurrency)
    if shows_frames(cands):
        require_seen(judge.executor)
    run_id = ctx.start_run("track", judge.model.uri, {"trajectory": [str(p) for p in paths], "runs": len(cands),
                                                      "every": params.every})
    plans = [(c, resolve_checkpoints(len(c.trajectory.steps), params.checkpoints, params.every)) for c in cands]
    count = ctx.call_counter(sum(len(points) for _, points in plans) * len(judge.repeats))
    curves = []
    for cand, chosen in plans:
        ctx.log.record_steps(run_id, cand.id, cand.trajectory.steps, start=0)
        feed = judge.point_feed(ctx.log.point_emitter(run_id, cand.id))  # points stream as they are scored
        curves.append(track(task, cand, chosen, judge=judge, watch=EventWatch(),
                            progress=lambda outcome: (feed(outcome), count(outcome))))
        ctx.log.emit_events(run_id, cand.id, curves[-1].events)
    labelled = [(c.voc, bool(c.outcome)) for c in curves if c.outcome is not None]
    return {"curves": [c.to_dict() for c in curves], "voc_by_outcome": voc_by_outcome(labelled) if labelled else None}


def run_harness(params: HarnessParams, ctx: Any) -> dict[str, Any]:
    from veriscale.harness.protocol.protocol_runner import RunOptions, run_tasks

    options = RunOptions(model_uri=ctx.model.uri, contract=params.contract, executor=params.executor,
                         max_steps=params.max_steps, phase_timeout_s=params.phase_timeout_s,
                         store_path=ctx.store.path, concurrency=1)
    summary = run_tasks([ctx.path(t) for t in params.tasks], options,
                        backend=ctx.model if params.executor == "builtin" else None)
    ctx.adopt_run(summary["store_run"])  # the harness records its own runs
    return summary


RUNNERS: dict[str, Callable[[Any, Any], dict[str, Any]]] = {
    "score": run_score, "compare": run_compare, "select": run_select, "select_many": run_select_many,
    "track": run_track, "harness": run_harness}
#: Kinds a running job of which can be stopped between model calls (a harness session cannot).
CANCELLABLE_WHILE_RUNNING = ("score", "compare", "select", "select_many", "track")


def paths_in(kind: str, params: dict[str, Any]) -> list[str]:
    """The file and folder paths a job's params name (each must lie under an allowed folder)."""
    found = list(params.get("paths") or []) + (list(params.get("tasks") or []) if kind == "harness" else [])
    if kind in ("select", "track") and params.get("task"):
        found.append(params["task"])
    criteria = params.get("criteria")
    if isinstance(criteria, str) and is_criteria_file(criteria):
        found.append(criteria)
    return found


def run_job(kind: str, params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Validate ``params`` for ``kind`` and run it; returns what its store run records as result."""
    return RUNNERS[kind](PARAMS[kind].model_validate(params), ctx)
