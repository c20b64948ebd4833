"""Held-out evaluation of evolved skills: leave one task out, learn from the others, rerun it.

For each task of the runs (a fold), skills are evolved from the failures of the *other* tasks only
(stored apart, under ``OUT/heldout/<task>/``), then the held-out task is run again with them and
graded. Before/after is reported on the held-out tasks alone: a skill is never scored on a task it
came from. With a handful of fixture tasks and this machine's model this is a mechanism check, not
a measurement of how good the skills are, and the report says so::

    result = leave_one_out(scored, out, propose_fn, rerun)
    result["folds"][0]   # {"held_out": "data_cleanup", "learned_from": [...], "before": 0.4, "after": 0.6, ...}
    result["note"]       # "a mechanism check on this machine's model, not ..."

``propose_fn(failures, fold_out) -> (accepted, rejected)`` evolves into ``fold_out``;
``rerun(task_dir, skills_dir) -> float | None`` runs and grades one task with those skills
(:func:`harness_rerun` does it with ``harness run`` and the grader).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Callable, Sequence

from veriscale.errors import UserError
from veriscale.harness.evolve.failures import Failure, ScoredRuns

HELDOUT_DIR = "heldout"
NOTE = ("a mechanism check on this machine's model, not a measurement of skill quality: each skill is scored "
        "only on a task held out from the failures it came from, over {n} held-out task(s)")

ProposeFn = Callable[[Sequence[Failure], Path], "tuple[list[dict[str, Any]], list[dict[str, Any]]]"]
RerunFn = Callable[[Path, Path], "float | None"]


def leave_one_out(scored: ScoredRuns, out: Path, propose_fn: ProposeFn, rerun: RerunFn) -> dict[str, Any]:
    """Run every fold; before is the held-out task's graded score in the runs, after its rerun's grade."""
    tasks: dict[str, Failure] = {}
    for failure in scored.failures:
        tasks.setdefault(failure.task, failure)
    folds: list[dict[str, Any]] = []
    for task, first in sorted(tasks.items()):
        learn = [f for f in scored.failures if f.task != task]
        fold: dict[str, Any] = {"held_out": task, "learned_from": sorted({f.task for f in learn}),
                                "before": first.score, "after": None, "accepted": [], "rejected": 0}
        if not learn:
            fold["skipped"] = "no failure of another task to learn from"
            folds.append(fold)
            continue
        fold_out = Path(out) / HELDOUT_DIR / task
        try:
            accepted, rejected = propose_fn(learn, fold_out)
        except UserError as exc:  # one fold's session answered out of format: the other folds still run
            fold["skipped"] = f"the session failed: {exc}"
            folds.append(fold)
            continue
        fold["accepted"] = [f"{a['skill']} v{a['version']}" for a in accepted]
        fold["rejected"] = len(rejected)
        if not accepted:
            fold["skipped"] = "no skill accepted from the other tasks' failures"
        elif first.task_dir is None:
            fold["skipped"] = "the run does not name the task folder (scored before evolve existed): re-score it"
        else:
            fold["after"] = rerun(first.task_dir, fold_out)
            if fold["after"] is None:
                fold["skipped"] = "the rerun was not graded"
        folds.append(fold)
    done = [f for f in folds if f["after"] is not None]
    before = statistics.fmean(f["before"] for f in done) if done else None
    after = statistics.fmean(f["after"] for f in done) if done else None
    return {"folds": folds, "held_out_tasks": len(done), "before": before, "after": after,
            "difference": None if before is None or after is None else after - before,
            "note": NOTE.format(n=len(done))}


def heldout_run_id() -> str:
    """A fresh run id for the held-out reruns (a reused id would resume an earlier rerun's phases)."""
    import datetime as _dt

    return "evolve-heldout-" + _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")


def harness_rerun(model_uri: str, grader: Any, *, run_id: str, contract: str = "artifact", no_jail: bool = False,
                  archive_dir: Path | None = None, backend: Any = None) -> RerunFn:
    """A ``rerun`` that runs the protocol on the task with the fold's skills and grades the delivery."""
    from veriscale.harness.protocol.layout import RunLayout
    from veriscale.harness.protocol.protocol_runner import RunOptions, run_tasks
    from veriscale.harness.scoring.score import ScoreItem, read_run, score_task

    def rerun(task_dir: Path, skills_dir: Path) -> float | None:
        options = RunOptions(model_uri=model_uri, contract=contract, run_id=run_id, no_jail=no_jail,
                             skills_dirs=[skills_dir])
        summary = run_tasks([task_dir], options, backend=backend)
        if summary["failed"]:
            return None
        layout = RunLayout.for_task(task_dir, run_id, None)
        result = score_task(ScoreItem(task_dir, read_run(layout.root)), grader=grader, select_only=False,
                            archive_dir=archive_dir)
        return result.revised if result.error is None else None

    return rerun
