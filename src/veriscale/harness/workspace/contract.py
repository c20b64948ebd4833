"""The task workspace contract: what a materialised task folder holds and how to read it.

A task is a folder that a verification session sees, and nothing else::

    <task>/
      spec/task.md                    what the agent was asked to do
      workspace/                      the inputs the rollouts worked with
      rollouts/r01/deliverables/      what rollout r01 delivered (+ *.view.txt text sidecars)
      rollouts/r01/trajectory/        its trace, when there is one
      rollouts/r02/...

Archived scores and the map from anonymous labels (r01, r02, ...) back to the original rollout
names live *outside* the folder, in ``<archive_dir>/<task>.scores.json`` (by default beside the
task folder), so a session that can only see the task cannot read them. Build a task with
``veriscale.harness.workspace.materialize.materialize``; read one with::

    task = TaskWorkspace.open(Path("tasks/finance"))
    for rollout in task.rollouts:
        print(rollout.label, [p.name for p in rollout.deliverables()])
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from veriscale.errors import UserError
from veriscale.harness.workspace.text_views import is_sidecar

SPEC_DIR = "spec"
TASK_FILE = "task.md"
INPUTS_DIR = "workspace"
ROLLOUTS_DIR = "rollouts"
DELIVERABLES_DIR = "deliverables"
TRAJECTORY_DIR = "trajectory"
ARCHIVE_SUFFIX = ".scores.json"
MATERIALIZE_REPORT_SUFFIX = ".materialize.json"


def archive_path(task_dir: Path, archive_dir: Path | None = None) -> Path:
    """Where the scores and label map of ``task_dir`` are archived (outside the task)."""
    folder = archive_dir if archive_dir is not None else task_dir.parent
    return folder / f"{task_dir.name}{ARCHIVE_SUFFIX}"


def deliverable_files(rollout_dir: Path) -> list[Path]:
    """Files a rollout delivered, sorted, without the ``*.view.txt`` sidecars.

    ``rollout_dir`` is ``rollouts/rNN`` (its ``deliverables/`` folder is read) or the
    ``deliverables/`` folder itself.
    """
    folder = rollout_dir if rollout_dir.name == DELIVERABLES_DIR else rollout_dir / DELIVERABLES_DIR
    if not folder.is_dir():
        raise UserError(
            f"rollout folder '{rollout_dir}' has no '{DELIVERABLES_DIR}/' folder: "
            "materialise the task with `veriscale harness materialize`"
        )
    return sorted(p for p in folder.rglob("*") if p.is_file() and not is_sidecar(p))


@dataclass(frozen=True)
class Rollout:
    """One anonymised rollout of a materialised task."""

    label: str
    path: Path

    @property
    def deliverables_dir(self) -> Path:
        return self.path / DELIVERABLES_DIR

    @property
    def trajectory_dir(self) -> Path:
        return self.path / TRAJECTORY_DIR

    def deliverables(self) -> list[Path]:
        """Delivered files (sidecars excluded), sorted."""
        return deliverable_files(self.path)

    def relative_deliverables(self) -> dict[str, Path]:
        """Delivered files keyed by their POSIX path relative to ``deliverables/``."""
        return {p.relative_to(self.deliverables_dir).as_posix(): p for p in self.deliverables()}


@dataclass(frozen=True)
class TaskWorkspace:
    """A materialised task folder, checked against the contract on ``open``."""

    path: Path
    rollouts: tuple[Rollout, ...]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def spec_file(self) -> Path:
        return self.path / SPEC_DIR / TASK_FILE

    @property
    def inputs_dir(self) -> Path:
        return self.path / INPUTS_DIR

    def task_text(self) -> str:
        return self.spec_file.read_text(encoding="utf-8")

    @classmethod
    def open(cls, task_dir: Path) -> "TaskWorkspace":
        """Read ``task_dir``; a missing spec or rollout folder is a ``UserError``."""
        task_dir = Path(task_dir)
        if not task_dir.is_dir():
            raise UserError(f"task folder '{task_dir}' does not exist: give a materialised task folder")
        spec = task_dir / SPEC_DIR / TASK_FILE
        if not spec.is_file():
            raise UserError(
                f"task folder '{task_dir}' has no {SPEC_DIR}/{TASK_FILE}: "
                "materialise it with `veriscale harness materialize`"
            )
        rollouts_root = task_dir / ROLLOUTS_DIR
        rollouts = tuple(
            Rollout(label=p.name, path=p)
            for p in sorted(rollouts_root.iterdir() if rollouts_root.is_dir() else [])
            if p.is_dir()
        )
        if not rollouts:
            raise UserError(
                f"task folder '{task_dir}' has no rollouts under {ROLLOUTS_DIR}/: "
                "materialise it from a source folder with at least one rollout"
            )
        for rollout in rollouts:
            if not rollout.deliverables_dir.is_dir():
                raise UserError(
                    f"rollout '{rollout.path}' has no {DELIVERABLES_DIR}/ folder: "
                    "re-materialise the task"
                )
        return cls(path=task_dir, rollouts=rollouts)
