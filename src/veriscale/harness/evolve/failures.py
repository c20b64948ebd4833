"""The failures evolution learns from: scored harness runs whose grader gave feedback.

A RUN is a results file ``harness score`` wrote (``score.json``, ``score-<run-id>.json``) or a
folder holding ``score.json`` (a ``--run`` or ``--runs`` folder). A task of it is a failure when
its delivery was graded below 1 and the grader said why (``"feedback"`` in its JSON line)::

    scored = read_scored_runs([Path("runs/score.json")])     # UserError when a run has no feedback
    for failure in scored.failures:
        failure.id, failure.task, failure.score, failure.feedback, failure.task_dir

``scored.values`` holds what the leak check forbids from these runs: every grader output and, per
task, its archived scores and label map (read from the archive beside the task, or ``archive_dir``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from veriscale.data.reader import BadInput, parse_json
from veriscale.data.regular import read_regular_text
from veriscale.errors import UserError, setting
from veriscale.harness.evolve.leak_check import ForbiddenValues, add_archive, add_grades

SCORE_FILE = "score.json"
PASSING = 1.0


@dataclass(frozen=True)
class Failure:
    """One task a scored run got wrong, with the grader's feedback."""

    id: str
    task: str
    run: str
    score: float
    feedback: str
    task_dir: Path | None
    delivered: Path | None


@dataclass
class ScoredRuns:
    """The failures of the runs given, the forbidden values they bring, and notes on what was skipped."""

    runs: list[Path]
    failures: list[Failure]
    values: ForbiddenValues
    notes: list[str] = field(default_factory=list)

    @property
    def tasks(self) -> list[str]:
        return sorted({f.task for f in self.failures})


def _results_file(run: Path) -> Path:
    if not run.exists():
        raise UserError(f"run '{run}' does not exist: give a score results file harness score wrote, or its folder")
    path = run / SCORE_FILE if run.is_dir() else run
    if not path.is_file():
        raise UserError(f"run '{run}' holds no {SCORE_FILE}: evolve needs runs scored by a grader "
                        f"(harness score with {setting('grader')}), given as the results file or its folder")
    return path


def _load(path: Path) -> dict[str, Any]:
    try:
        data = parse_json(read_regular_text(path, "score results file"), f"score results file '{path}'")
    except (BadInput, ValueError) as exc:
        raise UserError(f"score results file '{path}' is not readable JSON ({exc}): give a file harness score wrote") from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise UserError(f"score results file '{path}' has no \"tasks\" list: give a file harness score wrote")
    return data


def _grade(task: dict[str, Any]) -> dict[str, Any] | None:
    grades = task.get("grades")
    grade = grades.get("revised") if isinstance(grades, dict) else None
    return grade if isinstance(grade, dict) and isinstance(grade.get("score"), (int, float)) else None


def read_scored_runs(runs: Sequence[Path], *, archive_dir: Path | None = None) -> ScoredRuns:
    """Read each run's graded tasks; ``UserError`` (one sentence) for a run with no grades or no feedback."""
    if not runs:
        raise UserError("no runs given: evolve needs at least one scored harness run with grader feedback")
    failures: list[Failure] = []
    values = ForbiddenValues()
    notes: list[str] = []
    files: list[Path] = []
    archives_read: set[Path] = set()
    for run in (Path(r) for r in runs):
        path = _results_file(run)
        files.append(path)
        data = _load(path)
        graded = [t for t in data["tasks"] if isinstance(t, dict) and _grade(t) is not None]
        if not graded:
            raise UserError(f"run '{run}' has no graded task (select-only or every task failed): evolve needs "
                            f"runs re-graded by a grader ({setting('grader')}) whose JSON line carries \"feedback\"")
        if not any(isinstance(_grade(t).get("feedback"), str) and _grade(t)["feedback"].strip() for t in graded):
            raise UserError(f"run '{run}' has no grader feedback: evolve needs a grader whose JSON line carries "
                            "\"feedback\" (a string saying what failed) beside \"score\"; re-score with such a grader")
        for task in graded:
            name = str(task.get("task"))
            add_grades(values, task.get("grades") or {}, f"{path.name} {name}")
            task_dir = Path(task["task_dir"]) if isinstance(task.get("task_dir"), str) else None
            if task_dir is not None:
                archive = (archive_dir or task_dir.parent) / f"{task_dir.name}.scores.json"
                if archive not in archives_read and archive.is_file():
                    archives_read.add(archive)
                    try:
                        add_archive(values, parse_json(read_regular_text(archive, "archive"), f"archive '{archive}'"),
                                    name)
                    except (UserError, ValueError) as exc:
                        notes.append(f"archive '{archive}' could not be read for the leak check ({exc})")
                elif archive not in archives_read:
                    notes.append(f"no archive at '{archive}': its scores and label map are not in the leak check; "
                                 f"set {setting('archive_dir')}")
            grade = _grade(task)
            assert grade is not None
            feedback = grade.get("feedback")
            if grade["score"] >= PASSING:
                continue
            if not isinstance(feedback, str) or not feedback.strip():
                notes.append(f"{name} in '{path}' scored {grade['score']:g} without feedback: not learned from")
                continue
            ident = name if all(f.id != name for f in failures) else f"{name}#{len(failures) + 1}"
            delivered = Path(task["delivered"]) if isinstance(task.get("delivered"), str) else None
            failures.append(Failure(id=ident, task=name, run=str(path), score=float(grade["score"]),
                                    feedback=feedback.strip(), task_dir=task_dir, delivered=delivered))
    if not failures:
        raise UserError("the runs given have no failure with grader feedback (every graded task scored 1 or said "
                        "nothing): evolve learns from failures the grader explained")
    return ScoredRuns(runs=files, failures=failures, values=values, notes=notes)
