"""``veriscale track --follow FILE``: score a running agent's steps as it appends them.

One step object per JSONL line (``veriscale.progress.step_records``); a partial line is waited for.
Each step prints its progress and any event at once. It stops on a ``{"done": true}`` line,
after ``--idle-timeout`` seconds without a new line, or on Ctrl-C; each way the curve so far is
written to the output file and recorded as a run in the store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from veriscale.cli.common import console, emit_json, err_console, fail, finish_with, note
from veriscale.cli.flags import cli_text
from veriscale.data.reader import BadInput, parse_json
from veriscale.engine.run_log import RunLog
from veriscale.engine.run_scope import RunHandle, recorded_run
from veriscale.errors import UserError, setting
from veriscale.models.vision_probe import require_seen
from veriscale.progress.events import EventWatch
from veriscale.progress.follow import IdleTimeout, follow_lines
from veriscale.progress.progress_judge import ProgressJudge
from veriscale.progress.step_records import RecordError, is_done, step_from_record, task_of
from veriscale.progress.tracker import ProgressTracker
from veriscale.shown_text import assembled


def follow_run(path: Path, task_file: Optional[Path], judge: ProgressJudge, watch_args: dict[str, Any],
               output: Path, plot: Optional[Path], idle_timeout: Optional[float], strict: bool, json_out: bool) -> None:
    from veriscale.data.text_input import read_text_input

    task = read_text_input(str(task_file), "task") if task_file else None
    store = judge.executor.store
    with recorded_run(store, "track --follow", judge.model.uri, {"follow": str(path), "task_file": str(task_file)}) as run:
        _follow(run, path, task, judge, watch_args, output, plot, idle_timeout, strict, json_out)


def _follow(run: RunHandle, path: Path, task: Optional[str], judge: ProgressJudge, watch_args: dict[str, Any],
            output: Path, plot: Optional[Path], idle_timeout: Optional[float], strict: bool, json_out: bool) -> None:
    store, run_id = run.store, run.id
    tracker: ProgressTracker | None = None
    vision_checked = False  # asked once, at the first step that shows images
    ended = "interrupted"
    log = RunLog(store)  # the dashboard streams these: each step, its point and events, as they come
    name = path.stem
    try:
        for number, line in follow_lines(path, idle_timeout=idle_timeout, on_wait=lambda msg: note(msg)):
            if not line.strip():
                continue
            try:
                record = parse_json(line, f"line {number} of '{path}'")
            except json.JSONDecodeError as exc:
                _bad_line(path, number, f"not JSON ({exc.msg})", strict)
                continue
            except BadInput as exc:
                _bad_line(path, number, exc.reason, strict)
                continue
            if is_done(record):
                ended = "done"
                break
            if task_of(record) is not None:
                if tracker is None and task is None:
                    task = task_of(record)
                continue
            try:
                step = step_from_record(record, base=path.parent)  # an image path is read beside the file
            except RecordError as exc:
                _bad_line(path, number, str(exc), strict)
                continue
            if tracker is None:
                if task is None:
                    raise UserError(f"'{path}' gives no task before its first step: pass {setting('task')} FILE "
                                    'or write {"task": "..."} as the first line')
                tracker = ProgressTracker(task, judge=judge, watch=EventWatch(**watch_args))
                tracker.curve.trajectory_id = tracker.curve.trajectory_id or name
            if step.images and not vision_checked:  # the first frame: does the model see them? (one sentence if not)
                require_seen(judge.executor)
                vision_checked = True
            log.record_steps(run_id, name, [step])
            point = tracker.update(step)
            log.emit(run_id, "point", {"trajectory": name, "point": point.to_dict(), "voc": tracker.curve.voc})
            for event in tracker.new_events:
                log.emit(run_id, "event", {"trajectory": name, "event": event.to_dict()})
            if not json_out:
                value = "failed" if point.value is None else f"{100 * point.value:3.0f}%"
                console.print(f"step {point.step:>4}  {value}  {tracker.curve.sparkline()[-40:]}", highlight=False)
            for event in tracker.new_events:
                err_console.print(assembled((f"{event.kind}: ", "yellow"), event.message), highlight=False, soft_wrap=True)
    except IdleTimeout:
        ended = "idle"
        note(f"no new line in '{path}' for {idle_timeout:g} s: stopped following")
    except KeyboardInterrupt:
        ended = "interrupted"
    _finish(tracker, run, ended, output, plot, json_out)


def _bad_line(path: Path, number: int, why: str, strict: bool) -> None:
    message = f"line {number} of '{path}' is not a step object ({why})"
    if strict:
        raise UserError(message + ": fix the writer, or drop --strict to skip such lines")
    err_console.print(assembled(("warning: ", "yellow"), f"{cli_text(message)}; skipped it"), highlight=False,
                      soft_wrap=True)


def _finish(tracker: ProgressTracker | None, run: RunHandle, ended: str, output: Path,
            plot: Optional[Path], json_out: bool) -> None:
    if tracker is None or not tracker.curve.points:
        run.finish("cancelled" if ended == "interrupted" else "failed", {"ended": ended, "error": "no step arrived"})
        fail(f"no step arrived before the run ended ({ended}): nothing to score", 2)
    curve = tracker.curve
    status = "cancelled" if ended == "interrupted" else "failed" if curve.failed else "ok"  # Ctrl-C: the curve so far
    payload = finish_with(run, {"ended": ended, "curves": [curve.to_dict()]}, output, status)
    if plot is not None:
        from veriscale.progress.curve_plot import plot_curves

        plot_curves([curve], plot)
    if json_out:
        emit_json(payload, "track")
    else:
        from veriscale.cli.curve_view import render_curve

        render_curve(curve)
        console.print(assembled((f"followed run ended ({ended}); curve so far written to ", ""), str(output)),
                      highlight=False)
    if ended == "interrupted":
        raise SystemExit(130)
