"""Score harness deliveries with a user-supplied grader: select-only or re-graded revision gain.

Two modes:

- ``select_only=True``: a task's score is the archived score of the rollout adjudication chose
  as base (from ``<task>.scores.json``, outside the task). The grader is never called.
- default, re-grade: the revised delivery and its unrevised base are graded in the same pass and
  ``final = select + (revised - base_regraded)``, so grader drift and judge noise cancel. When
  adjudication chose no base (a rebuild), ``final`` is the delivery's own grade. ``final`` is
  not clipped to [0, 1].

The grader contract: :mod:`.grader`; reading deliveries and the archive: :mod:`.delivery`.

Usage::

    grader = GraderCommand.parse("python3 examples/grader/grade.py --references refs/")
    item = ScoreItem(task_dir=Path("tasks/t1"), delivery=read_run(Path("runs/t1")))
    report = score_deliveries([item], grader=grader, seed=0)
    report.methods["harness"].mean, report.drift, write_report(report, Path("runs/score.json"))
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from veriscale.errors import UserError, setting
from veriscale.harness.jsonfiles import write_json
from veriscale.harness.safe_fs import resolved
from veriscale.harness.scoring.bootstrap import Estimate, bootstrap_mean
from veriscale.harness.scoring.delivery import (  # noqa: F401 - re-exported for callers of score
    Delivery, _archived_scores, explicit_delivery, read_archive, read_run,
)
from veriscale.harness.workspace import contract as ws
from veriscale.harness.scoring.grader import (  # noqa: F401 - re-exported for callers of score
    Grade, GraderCommand, GraderFailure, parse_grader_output, stage_deliverables,
)

DEFAULT_DRIFT_TOLERANCE = 0.05


@dataclass(frozen=True)
class ScoreItem:
    """One task to score: its materialised folder and what the session delivered.

    ``delivery=None`` with a ``problem`` records a task whose run delivered nothing usable
    (e.g. adjudication failed): it is reported as not scored, never as 0.
    """

    task_dir: Path
    delivery: Delivery | None
    problem: str | None = None


@dataclass
class TaskScore:
    """Everything known about one task's score; ``final`` is None when it could not be scored."""

    task: str
    base: str | None
    final: float | None = None
    select: float | None = None
    revised: float | None = None
    base_regraded: float | None = None
    single_rollout: float | None = None
    oracle: float | None = None
    revisions: int = 0
    unresolved: int = 0
    grades: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    task_dir: str | None = None  # the materialised task (``harness evolve`` reads its rollouts and archive)
    delivered: str | None = None  # the graded deliverables folder

    @property
    def drift(self) -> float | None:
        """base_regraded - archived score of the base, when both exist."""
        if self.base_regraded is None or self.select is None:
            return None
        return self.base_regraded - self.select


@dataclass
class ScoreReport:
    """Per-task scores, means with bootstrap intervals, paired comparisons and drift."""

    mode: str
    tasks: list[TaskScore]
    preflight: str | None
    methods: dict[str, Estimate | None]
    comparisons: dict[str, Estimate | None]
    drift: list[dict[str, Any]]
    warnings: list[str]
    grader: str | None
    tolerance: float
    seed: int
    n_resamples: int
    confidence: float

    @property
    def failures(self) -> list[TaskScore]:
        return [t for t in self.tasks if t.error is not None]

    def to_dict(self) -> dict[str, Any]:
        tasks = []
        for task in self.tasks:
            row = asdict(task)
            row["drift"] = task.drift
            tasks.append(row)
        return {
            "mode": self.mode,
            "grader": self.grader,
            "preflight": self.preflight,
            "formula": "final = select + (revised - base_regraded); no base: final = revised"
            if self.mode == "regrade" else "final = archived score of the chosen base",
            "methods": {k: (v.to_dict() if v else None) for k, v in self.methods.items()},
            "comparisons": {k: (v.to_dict() if v else None) for k, v in self.comparisons.items()},
            "drift": self.drift,
            "drift_tolerance": self.tolerance,
            "bootstrap": {"seed": self.seed, "resamples": self.n_resamples, "confidence": self.confidence},
            "failures": [{"task": t.task, "error": t.error} for t in self.failures],
            "warnings": self.warnings,
            "tasks": tasks,
        }


def _grade_folder(grader: GraderCommand, task_dir: Path, folder: Path, scratch: Path, name: str) -> tuple[Grade, list[str]]:
    staged = scratch / name / ws.DELIVERABLES_DIR
    skipped = stage_deliverables(folder, staged)
    return grader.grade(resolved(task_dir, "task folder"), staged), skipped


def score_task(item: ScoreItem, *, grader: GraderCommand | None, select_only: bool,
               archive_dir: Path | None = None) -> TaskScore:
    """Score one task; grader contract breaches are recorded in ``error``, not raised."""
    task = ws.TaskWorkspace.open(item.task_dir)
    labels = {r.label for r in task.rollouts}
    delivery = item.delivery
    if delivery is None:
        return TaskScore(task=task.name, base=None, error=item.problem or "no delivery", task_dir=str(task.path))
    if delivery.base is not None and delivery.base not in labels:
        raise UserError(
            f"base '{delivery.base}' of task '{task.name}' is not one of its rollouts ({', '.join(sorted(labels))}): "
            f"fix finish.json or {setting('base')}"
        )
    archived = _archived_scores(read_archive(task.path, archive_dir), task.path)
    pool = [v for k, v in archived.items() if k in labels and v is not None]
    result = TaskScore(task=task.name, base=delivery.base, revisions=len(delivery.revisions),
                       unresolved=len(delivery.unresolved), task_dir=str(task.path),
                       delivered=str(delivery.deliverables))
    result.single_rollout = sum(pool) / len(pool) if pool else None
    result.oracle = max(pool) if pool else None
    result.select = archived.get(delivery.base) if delivery.base else None
    if delivery.base and result.select is None:
        result.notes.append(f"the archive has no score for base {delivery.base}")
    if select_only:
        if delivery.base is None:
            result.error = "adjudication chose no base (rebuild): select-only has no archived score for it"
        elif result.select is None:
            result.error = f"no archived score for base {delivery.base}"
        else:
            result.final = result.select
        return result
    assert grader is not None
    with tempfile.TemporaryDirectory(prefix="veriscale-grade-") as scratch_name:
        scratch = Path(scratch_name)
        try:
            revised, skipped = _grade_folder(grader, task.path, delivery.deliverables, scratch, "revised")
            result.revised = revised.score
            result.grades["revised"] = asdict(revised)
            if skipped:
                result.notes.append("left out of grading (delivered): " + ", ".join(skipped))
            if delivery.base is not None:
                base_dir = task.path / ws.ROLLOUTS_DIR / delivery.base / ws.DELIVERABLES_DIR
                base, skipped = _grade_folder(grader, task.path, base_dir, scratch, "base")
                result.base_regraded = base.score
                result.grades["base"] = asdict(base)
                if skipped:
                    result.notes.append("left out of grading (base): " + ", ".join(skipped))
        except GraderFailure as exc:
            result.error = f"grader failed: {exc}"
            return result
    if delivery.base is None:
        result.final = result.revised
    elif result.select is None:
        result.final = result.revised
        result.notes.append("final is the delivery's own grade because the base has no archived score")
    else:
        assert result.revised is not None and result.base_regraded is not None
        result.final = result.select + (result.revised - result.base_regraded)
    return result


def preflight(grader: GraderCommand, item: ScoreItem, archive_dir: Path | None = None) -> str:
    """Grade a known-good input (the best-archived rollout of ``item``); ``UserError`` if the grader fails.

    Returns a one-line description of what was checked.
    """
    task = ws.TaskWorkspace.open(item.task_dir)
    archived = _archived_scores(read_archive(task.path, archive_dir), task.path)
    scored = [(score, r.label) for r in task.rollouts if (score := archived.get(r.label)) is not None]
    label = max(scored)[1] if scored else task.rollouts[0].label
    with tempfile.TemporaryDirectory(prefix="veriscale-preflight-") as scratch:
        try:
            grade, _ = _grade_folder(grader, task.path, task.path / ws.ROLLOUTS_DIR / label / ws.DELIVERABLES_DIR,
                                     Path(scratch), "preflight")
        except GraderFailure as exc:
            raise UserError(
                f"grader '{grader}' failed its preflight on rollout {label} of task '{task.name}' ({exc}): "
                "fix the grader so it prints one JSON line {\"score\": x} and exits 0"
            ) from None
    return f"grader preflight on {task.name}/{label}: score {grade.score:.4f} (archived {archived.get(label)})"


def _paired(tasks: Sequence[TaskScore], a: str, b: str) -> list[float]:
    pairs = [(getattr(t, a), getattr(t, b)) for t in tasks if t.error is None]
    return [x - y for x, y in pairs if x is not None and y is not None]


def score_deliveries(
    items: Sequence[ScoreItem],
    *,
    grader: GraderCommand | None = None,
    select_only: bool = False,
    archive_dir: Path | None = None,
    tolerance: float = DEFAULT_DRIFT_TOLERANCE,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    run_preflight: bool = True,
) -> ScoreReport:
    """Score every item, then summarise: means with intervals and paired comparisons.

    Re-grade mode needs ``grader`` and (unless ``run_preflight=False``) first checks it on a
    known-good rollout, refusing to score when it fails.
    """
    if not items:
        raise UserError("nothing to score: give at least one task folder")
    if tolerance < 0:
        raise UserError(f"drift tolerance must be non-negative, got {tolerance}: set {setting('tolerance')} to e.g. 0.05")
    warnings: list[str] = []
    checked: str | None = None
    if not select_only:
        if grader is None:
            raise UserError(f"re-grade scoring needs a grader: give {setting('grader')}, "
                            f"or use {setting('select_only')} to score with the archived scores")
        if run_preflight:
            checked = preflight(grader, items[0], archive_dir)
    tasks = [score_task(item, grader=None if select_only else grader, select_only=select_only,
                        archive_dir=archive_dir) for item in items]
    drift = [
        {"task": t.task, "base": t.base, "archived": t.select, "regraded": t.base_regraded, "diff": t.drift}
        for t in tasks if t.drift is not None and abs(t.drift) > tolerance + 1e-9  # float noise: 0.8 - 0.75 is not 0.05
    ]
    if drift:
        listed = ", ".join(f"{d['task']}/{d['base']} ({d['diff']:+.3f})" for d in drift)
        warnings.append(
            f"re-graded bases drift from archived scores by more than {tolerance:g} on {len(drift)} task(s): {listed}; "
            "the grader differs from the one that made the archive, so select-only and harness scores are on different scales"
        )
    for t in tasks:
        if t.error:
            warnings.append(f"{t.task}: not scored: {t.error}")
        warnings.extend(f"{t.task}: {note}" for note in t.notes)

    def est(values: list[float]) -> Estimate | None:
        return bootstrap_mean(values, n_resamples=n_resamples, seed=seed, confidence=confidence)

    ok = [t for t in tasks if t.error is None]
    methods: dict[str, Estimate | None] = {
        "single_rollout": est([t.single_rollout for t in ok if t.single_rollout is not None]),
        "select_only": est([t.select for t in ok if t.select is not None]),
    }
    comparisons: dict[str, Estimate | None] = {}
    if not select_only:
        methods["harness"] = est([t.final for t in ok if t.final is not None])
        comparisons["harness - single_rollout"] = est(_paired(tasks, "final", "single_rollout"))
        comparisons["harness - select_only"] = est(_paired(tasks, "final", "select"))
    comparisons["select_only - single_rollout"] = est(_paired(tasks, "select", "single_rollout"))
    methods["oracle"] = est([t.oracle for t in ok if t.oracle is not None])
    return ScoreReport(
        mode="select-only" if select_only else "regrade", tasks=tasks, preflight=checked, methods=methods, comparisons=comparisons,
        drift=drift, warnings=warnings, grader=str(grader) if grader and not select_only else None,
        tolerance=tolerance, seed=seed, n_resamples=n_resamples, confidence=confidence,
    )


def write_report(report: ScoreReport, path: Path) -> Path:
    """Write ``report`` as JSON to ``path`` (parents created) and return the path."""
    path = Path(path)
    return write_json(path, report.to_dict(), default=str)
