"""Where one run of one task keeps its files; the one module that builds paths in a run folder.

A run lives outside the task folder::

    <task>.runs/<run-id>/
      claims/{claims.json,agenda.json,claims.md}
      sessions/resolve/ledger.json        sessions/challenge/ledger.json
      sessions/adjudicate/finish.json     sessions/adjudicate/repair.json
      sessions/adjudicate/out/deliverables/          the delivered bundle
      evidence/{resolver,challenger}.json            valid ledgers, read-only for adjudication
      transcripts/{resolve,challenge,adjudicate}.jsonl
      phases/<phase>.json                 status, problems, cost of each phase
      delivery/{finish.json,deliverables/}   the host's copy of the gated delivery: what `score` reads
      delivery.json                       the gate's per-file report
      outcome.json                        the task's outcome and total cost

Usage::

    layout = RunLayout.for_task(Path("tasks/t1"), "run-1")   # tasks/t1.runs/run-1
    layout.record("adjudicate"), layout.transcript("deliver"), layout.delivery_dir
    run_dir_for(Path("tasks/t1"), "run-1", runs_root=None)   # the same folder, unresolved
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from veriscale.errors import UserError
from veriscale.harness.safe_fs import resolved
from veriscale.harness.skills.library import skill_mounts

RUNS_SUFFIX = ".runs"
#: The host-written delivery of a run, beside (never inside) the sessions' folders.
DELIVERY_DIR = "delivery"
#: Inside DELIVERY_DIR: the adjudication's finish record and the delivered files.
FINISH_FILE = "finish.json"
DELIVERABLES_SUBDIR = "deliverables"


def run_dir_for(task_dir: Path, run_id: str | None, runs_root: Path | None = None) -> Path:
    """``<task>.runs/<run_id>`` beside the task, or ``<runs_root>/<task name>/<run_id>`` (no run id:
    ``<runs_root>/<task name>``); paths as given, not resolved."""
    if runs_root is not None:
        return runs_root / task_dir.name / run_id if run_id else runs_root / task_dir.name
    return task_dir.parent / f"{task_dir.name}{RUNS_SUFFIX}" / str(run_id)


@dataclass(frozen=True)
class RunLayout:
    """Where one run of one task keeps its files (outside the task folder)."""

    root: Path

    @classmethod
    def for_task(cls, task_dir: Path, run_id: str, runs_root: Path | None = None) -> "RunLayout":
        """``<task>.runs/<run_id>`` beside the task, or ``<runs_root>/<task name>/<run_id>``."""
        task_dir = resolved(task_dir, "task folder")
        base = (resolved(runs_root, "runs folder") / task_dir.name) if runs_root else task_dir.parent / f"{task_dir.name}{RUNS_SUFFIX}"
        root = base / run_id
        if root == task_dir or task_dir in root.parents:
            raise UserError(f"run folder '{root}' is inside the task folder '{task_dir}': pick a runs folder outside it")
        return cls(root)

    @property
    def claims_dir(self) -> Path:
        return self.root / "claims"

    @property
    def evidence_dir(self) -> Path:
        return self.root / "evidence"

    def session_dir(self, phase: str) -> Path:
        return self.root / "sessions" / ("adjudicate" if phase == "deliver" else phase)

    def transcript(self, phase: str) -> Path:
        return self.root / "transcripts" / f"{'adjudicate' if phase == 'deliver' else phase}.jsonl"

    def phase_file(self, phase: str) -> Path:
        return self.root / "phases" / f"{phase}.json"

    def visible_dirs(self, phase: str, skills_dirs: Sequence[Path] = ()) -> list[Path]:
        """Read-only folders a session of ``phase`` sees beside the task: the claim map
        (resolve, challenge) or the staged ledgers (adjudicate, deliver), then the skills."""
        own = self.claims_dir if phase in ("resolve", "challenge") else self.evidence_dir
        return [own, *skill_mounts(skills_dirs)]

    def record(self, phase: str) -> Path:
        names = {"resolve": "ledger.json", "challenge": "ledger.json", "adjudicate": "finish.json", "deliver": "repair.json"}
        return self.session_dir(phase) / names[phase]

    @property
    def deliverables_dir(self) -> Path:
        return self.session_dir("deliver") / "out" / "deliverables"

    @property
    def delivery_dir(self) -> Path:
        """The host-written delivery ``harness score`` reads; no session can write there."""
        return self.root / DELIVERY_DIR

    @property
    def delivery_report(self) -> Path:
        return self.root / "delivery.json"

    @property
    def outcome_file(self) -> Path:
        return self.root / "outcome.json"
