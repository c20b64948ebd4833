"""The task and candidates a selection is asked about, from paths (the CLI's and the server's).

    task, candidates = resolve_inputs(["task.md", "a.md", "b.md"], task_file=None, fmt=None)
    task_taken_from(task, task_file=None)        # 'task.md': the first path was taken as the task
    task, candidates = resolve_inputs(["trials.jsonl"], task_file="task.md", fmt=None)
    criteria = default_criteria(candidates)      # "agent" for trajectories, else "general"

Where the task comes from, in order: ``task_file``; else the first path, when more paths follow
and it holds one plain answer with no task of its own; else the task the runs carry. One plain
answer alone (``select task.md``) is refused: it is a task with no candidate, or a candidate
with no task, and either way there is nothing to choose.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Sequence

from veriscale.data.importers import load_candidates
from veriscale.data.model import Candidate, Task
from veriscale.data.text_input import read_text_input
from veriscale.errors import UserError, setting


def resolve_inputs(paths: list[str], task_file: str | None, fmt: str | None) -> tuple[Task | None, list[Candidate]]:
    """The task (None: take it from the runs) and the candidates named on the command line."""
    if not paths:
        raise UserError("no candidates given: pass candidate files, a folder or a JSONL pool")
    if task_file is not None:
        return task_from_file(task_file), load_candidates(paths, fmt)
    if len(paths) >= 2 and Path(paths[0]).is_file():
        first = load_candidates([paths[0]])
        if len(first) == 1 and _plain(first[0]):
            return task_from_file(paths[0]), load_candidates(paths[1:], fmt)
    candidates = load_candidates(paths, fmt)
    if len(paths) == 1 and len(candidates) == 1 and _plain(candidates[0]):
        raise UserError(f"'{paths[0]}' is one plain text with no task and no candidate beside it: give the task "
                        f"and then the candidates (veriscale select TASK CANDIDATE...), or the candidates with "
                        f"{setting('task')} FILE")
    return None, candidates


def _plain(candidate: Candidate) -> bool:
    """One answer with no task of its own and no steps: the leading TASK of ``select TASK CANDIDATES``."""
    return candidate.task is None and candidate.trajectory is None


def task_from_file(path: str) -> Task:
    """The task in ``path`` (``-``: stdin); ``metadata["file"]`` says where it was read."""
    return Task(text=read_text_input(path, "task"), id=Path(path).stem if path != "-" else "",
                metadata={"file": path})


def task_taken_from(task: Task | None, task_file: str | None) -> str | None:
    """The path that was taken as the task when none was named (the leading TASK form), else None."""
    if task is None or task_file is not None:
        return None
    return task.metadata.get("file")


def default_criteria(candidates: list[Candidate]) -> str:
    """The pack a command uses when none is given: the one the candidates' format suggests when they
    all come with the same (SWE-bench predictions: ``swe``, step solutions: ``math``), else
    ``agent`` (the terminal pack) for trajectories, else ``general``."""
    suggested = {c.metadata.get("criteria_pack") for c in candidates}
    if len(suggested) == 1 and (pack := suggested.pop()) is not None:
        return str(pack)
    return "agent" if any(c.trajectory and c.trajectory.steps for c in candidates) else "general"


def shows_images(task: Task | None, candidates: Sequence[Candidate]) -> bool:
    """Whether a selection over these inputs shows the judge any image (the task's or a candidate's)."""
    return bool(task is not None and task.images) or any(c.images for c in candidates)
