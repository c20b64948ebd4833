"""``veriscale track``: a trajectory's progress curve, its VOC and events; ``--follow`` a live run.

    veriscale track run.json                          # every step; curve, VOC, events
    veriscale track ok.json failed.json --plot both.png   # several runs, one plot, mean VOC by outcome
    veriscale track trials.jsonl.gz --id t3 --every 5 --plot curve.png
    veriscale track --follow steps.jsonl --task task.md   # a running agent's steps, as they come
    veriscale track trials.jsonl.gz --yes --executor ray  # each trajectory's curve a Ray task
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from veriscale.models.vision_probe import require_seen
from veriscale.progress.frame_steps import shows_frames, with_frame_steps
from veriscale.cli import options as o
from veriscale.cli.common import (confirm_cost, console, emit_json, fail, finish_with, note, positive_seconds,
                                  user_errors)
from veriscale.engine.run_log import RunLog
from veriscale.engine.run_scope import recorded_run
from veriscale.errors import UserError, setting
from veriscale.progress.events import (DEFAULT_DONE_THRESHOLD, DEFAULT_REGRESSION_DROP, DEFAULT_STALL_WINDOW,
                                       EventWatch)
from veriscale.progress.progress_judge import ProgressJudge
from veriscale.progress.prompt import DEFAULT_PROGRESS_SCALE
from veriscale.shown_text import assembled, for_terminal
from veriscale.cli.curve_view import render_curve
from veriscale.progress.curve import ProgressCurve

MANY_RUNS = 20  # tracking more runs than this at once asks first
CheckpointsOpt = Annotated[Optional[str], typer.Option("--checkpoints", help="Score only these steps, e.g. 5,10,20.")]
EveryOpt = Annotated[Optional[int], typer.Option("--every", help="Score every N-th step (and the last).")]
StallOpt = Annotated[int, typer.Option("--stall-window", help="Stall: no gain over this many checkpoints.")]
DropOpt = Annotated[float, typer.Option("--regression-drop", help="Regression: a fall of more than this below the best so far (0-1).")]
DoneOpt = Annotated[float, typer.Option("--done-threshold", help="Likely done: progress at or above this (0-1).")]
StepTokensOpt = Annotated[Optional[int], typer.Option("--step-tokens", help="Token budget of one rendered step (default 160 embedded, 500 servers).")]
BudgetOpt = Annotated[Optional[int], typer.Option("--budget-tokens", help="Token budget of the shown steps (default: what the context leaves).")]


def judge_options(model, store, scale, repeats, reasoning, discrete, seed, refresh, max_calls, concurrency,
                  budget_tokens, step_tokens) -> dict[str, Any]:
    """The progress judge's keywords the command resolved (``judge_from``'s arguments less the model,
    store and concurrency): what a Ray worker builds its own judge from."""
    return dict(scale=scale, repeats=repeats, reasoning=reasoning, discrete=discrete, seed=seed, refresh=refresh,
                max_calls=max_calls, budget_tokens=budget_tokens, step_tokens=step_tokens)


def judge_from(model, store, scale, repeats, reasoning, discrete, seed, refresh, max_calls, concurrency,
               budget_tokens, step_tokens) -> ProgressJudge:
    cs = o.command_settings(model, store, concurrency)
    c = cs.concurrency
    return ProgressJudge(o.open_model(cs), store=o.open_store(cs), scale=scale, repeats=repeats,
                         reasoning=reasoning, discrete=discrete, seed=seed, refresh=refresh, max_calls=max_calls,
                         concurrency=c, budget_tokens=budget_tokens, step_tokens=step_tokens)


def _load(trajectories: list[Path], task_file: Optional[Path], only_id: Optional[str]):
    from veriscale.data.importers import load_candidates
    from veriscale.data.text_input import read_text_input

    cands = []
    for path in trajectories:
        found = [with_frame_steps(c) for c in load_candidates([str(path)])]
        found = [c for c in found if c.trajectory is not None and c.trajectory.steps]
        if not found:
            raise UserError(f"'{path}' holds no run with steps or frames: progress is scored on a trajectory's "
                            "steps, or on a video's or a frame folder's frames")
        cands += found
    if only_id is not None:
        cands = [c for c in cands if c.id == only_id]
        if not cands:
            raise UserError(f"no run with id '{only_id}' in the files given: leave out --id to track every run")
    task = read_text_input(str(task_file), "task") if task_file else None
    return cands, task


def register(app: typer.Typer) -> None:
    @app.command()
    def track(
        trajectory: Annotated[Optional[list[Path]], typer.Argument(help="Runs in any importer format (a file may hold many trajectories).")] = None,
        task_file: Annotated[Optional[Path], typer.Option("--task", help="Task file (default: the task the run names).")] = None,
        only_id: Annotated[Optional[str], typer.Option("--id", help="Track only the run with this id.")] = None,
        checkpoints: CheckpointsOpt = None, every: EveryOpt = None,
        follow: Annotated[Optional[Path], typer.Option("--follow", help="Tail this JSONL file of step objects as an agent writes it.")] = None,
        idle_timeout: Annotated[Optional[float], typer.Option("--idle-timeout", help="With --follow: stop after this many seconds without a new line.")] = None,
        output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the curve(s) as JSON here (--follow default: FILE.progress.json).")] = None,
        plot: Annotated[Optional[Path], typer.Option("--plot", help="Write the curve(s) as a PNG plot.")] = None,
        strict: Annotated[bool, typer.Option("--strict", help="With --follow: stop at a malformed line instead of skipping it.")] = False,
        yes: Annotated[bool, typer.Option("--yes", "-y", help=f"Track more than {MANY_RUNS} runs without asking.")] = False,
        stall_window: StallOpt = DEFAULT_STALL_WINDOW, regression_drop: DropOpt = DEFAULT_REGRESSION_DROP,
        done_threshold: DoneOpt = DEFAULT_DONE_THRESHOLD,
        model: o.ModelOpt = None, store: o.StoreOpt = None,
        scale: Annotated[str, typer.Option("--scale", help="Progress scale: digits[:G] (default digits: 9 = 100 % done, 1 = none), letters:G (A = 100 %), yesno.")] = DEFAULT_PROGRESS_SCALE,
        repeats: o.RepeatsOpt = None, reasoning: o.ReasoningOpt = False, discrete: o.DiscreteOpt = False,
        seed: o.SeedOpt = 0, refresh: o.RefreshOpt = False, json_out: o.JsonOpt = False,
        max_calls: o.MaxCallsOpt = None, concurrency: o.ConcurrencyOpt = None,
        budget_tokens: BudgetOpt = None, step_tokens: StepTokensOpt = None,
        executor: o.ExecutorOpt = "local", address: o.AddressOpt = None,
    ) -> None:
        """Score a trajectory's prefixes: progress curve, Value-Order Correlation and events.

        Example: veriscale track run.json --every 5 --plot curve.png
        """
        with user_errors():
            watch_args = dict(stall_window=stall_window, regression_drop=regression_drop, done_threshold=done_threshold)
            EventWatch(**watch_args)  # bad thresholds stop here, before any model loads
            positive_seconds(idle_timeout, "--idle-timeout", "600")  # NaN or inf would follow forever
            if (not trajectory) == (follow is None):
                raise UserError("give a TRAJECTORY file to track, or --follow FILE for a running agent (not both)")
            judge_args = (model, store, scale, repeats, reasoning, discrete, seed, refresh, max_calls, concurrency,
                          budget_tokens, step_tokens)
            if follow is not None:
                from veriscale.cli.track_follow import follow_run

                if executor != "local" or address is not None:
                    raise UserError(f"{setting('executor', executor)} applies to finished trajectories: a followed "
                                    "run is scored here as its steps come (drop it)")
                if checkpoints or every:
                    raise UserError(f"{setting('checkpoints')} and {setting('every')} apply to a finished trajectory; "
                                    "a followed run is scored at every step")
                follow_run(follow, task_file, judge_from(*judge_args), watch_args,
                           output or follow.with_name(follow.name + ".progress.json"), plot, idle_timeout, strict,
                           json_out)
                return
            o.ray_executor(executor, address, start=False)  # a wrong --executor or --address: before reading anything
            _track_files(trajectory, task_file, only_id, checkpoints, every, judge_args, watch_args, output, plot, json_out,
                         yes, (executor, address))


def _track_files(trajectory: list[Path], task_file, only_id, checkpoints, every, judge_args, watch_args,
                 output, plot, json_out: bool, yes: bool, where: tuple[str, Optional[str]] = ("local", None)) -> None:
    from veriscale.progress.checkpoints import parse_checkpoints, resolve_checkpoints
    from veriscale.progress.offline_track import track as track_curve

    cands, task = _load(trajectory, task_file, only_id)
    if len(cands) > MANY_RUNS:
    
        confirm_cost(f"the files hold {len(cands)} runs to track (pick one with --id)", yes)
    wanted = parse_checkpoints(checkpoints) if checkpoints else None
    plans = [(c, resolve_checkpoints(len(c.trajectory.steps), wanted, every)) for c in cands]
    runner = o.ray_executor(*where)  # the Ray cluster joined (or one sentence) once the input is known good
    judge = judge_from(*judge_args)
    if shows_frames(cands):
        require_seen(judge.executor)  # a model that does not see frames is refused before any checkpoint
    store = judge.executor.store
    args = {"trajectory": [str(t) for t in trajectory], "runs": len(cands), "checkpoints": checkpoints, "every": every}
    with recorded_run(store, "track", judge.model.uri, {**args, **({"executor": "ray"} if runner else {})}) as run:
        run_id = run.id
        total = sum(len(points) for _, points in plans) * len(judge.repeats)
        curves: list[ProgressCurve] = []
        log = RunLog(store)  # the trajectory viewer's steps, and the curve as events for the dashboard
        with o.call_progress(total, "progress calls", not json_out, what="track", unit="checkpoint calls") as advance:
            if runner is not None:
                curves = _curves_on_ray(runner, task, plans, judge, judge_options(*judge_args), watch_args, run_id,
                                        advance)
                for (cand, _), curve in zip(plans, curves):
                    log.record_steps(run_id, cand.id, cand.trajectory.steps, start=0)
                    emit = log.point_emitter(run_id, cand.id)
                    for point in curve.points:
                        emit(point)
                    log.emit_events(run_id, cand.id, curve.events)
            else:
                for cand, chosen in plans:
                    log.record_steps(run_id, cand.id, cand.trajectory.steps, start=0)
                    feed = judge.point_feed(log.point_emitter(run_id, cand.id))
                    curves.append(track_curve(task, cand, chosen, judge=judge, watch=EventWatch(**watch_args),
                                              progress=lambda outcome: (advance(outcome), feed(outcome))))
                    log.emit_events(run_id, cand.id, curves[-1].events)
        payload = finish_with(run, _payload(curves), output, "failed" if any(c.failed for c in curves) else "ok")
    _emit(curves, payload, output, plot, json_out)


def _curves_on_ray(runner, task, plans, judge: ProgressJudge, options: dict[str, Any], watch_args, run_id: int,
                   advance) -> list[ProgressCurve]:
    """Each trajectory's curve as a Ray unit (its calls committed here, linked to the track run as they
    land), the curves in the order of ``plans``; a rerun's workers start from the calls the store holds,
    and a trajectory that shares a call with an earlier one waits for it and takes its answer."""
    from veriscale.engine import sync_edge
    from veriscale.many.units import chain_shared, run_units
    from veriscale.progress.offline_track import plan_track, track_unit

    units = []
    for i, (cand, chosen) in enumerate(plans):
        planned = plan_track(task, cand, judge, chosen)  # rendered here too: the keys of the calls it makes
        keys = [str(c.key) for c in judge.executor.keyed(planned.calls)]
        units.append(track_unit(f"track:{i}:{cand.id}", task, cand, chosen, judge_options=options, watch=watch_args,
                                seed_keys=keys))
    results = sync_edge.run(run_units(runner, chain_shared(units), source=judge, run_id=run_id, at_once=len(units),
                                      on_call=advance, max_calls=options.get("max_calls"),
                                      calls_of=lambda result: int(result[1].model_calls)))
    return [curve for curve, _ in results]


def _payload(curves: list[ProgressCurve]) -> dict[str, Any]:
    from veriscale.progress.voc import voc_by_outcome

    labelled = [(c.voc, bool(c.outcome)) for c in curves if c.outcome is not None]
    return {"curves": [c.to_dict() for c in curves], "voc_by_outcome": voc_by_outcome(labelled) if labelled else None}


def _emit(curves: list[ProgressCurve], payload: dict[str, Any], output, plot, json_out: bool) -> None:
    if plot is not None:
        from veriscale.progress.curve_plot import plot_curves

        plot_curves(curves, plot)
    if json_out:
        emit_json(payload, "track")
    else:
        for curve in curves:
            render_curve(curve)
        by = payload.get("voc_by_outcome")
        if by and len(curves) > 1:
            for name, group in by.items():
                if group["n"]:
                    console.print(for_terminal(f"mean VOC of {name} runs: {group['mean_voc']:.3f} (n={group['n']})"),
                                  highlight=False)
        if output is not None:
            console.print(assembled(("curve written to ", ""), str(output)), style="dim", highlight=False)
        if plot is not None:
            console.print(assembled(("plot written to ", ""), str(plot)), style="dim", highlight=False)
    for curve in curves:
        for text in curve.notes:
            note(f"{curve.trajectory_id}: {text}" if curve.trajectory_id and len(curves) > 1 else text)
    if any(c.failed for c in curves):
        fail("some checkpoints have no score because their model calls failed (rerun to retry only those calls)", 3)
