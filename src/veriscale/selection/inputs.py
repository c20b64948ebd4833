"""The task and candidates a selection is asked about, from paths (the CLI's and the server's).

    task, candidates = resolve_inputs(["task.md", "a.md", "b.md"], task_file=None, fmt=None)
    task, candidates = resolve_inputs(["trials.jsonl"], task_file="task.md", fmt=None)
    criteria = default_criteria(candidates)      # "agent" for trajectories, else "general"

Where the task comes from, in order: ``task_file``; else the first path, when more paths follow
and it holds one plain answer with no task of its own; else the task the runs carry.
"""

from __future__ import annotations

from pathlib import Path

from veriscale.data.importers import load_candidates
from veriscale.data.model import Candidate, Task
from veriscale.data.text_input import read_text_input
from veriscale.errors import UserError


def resolve_inputs(paths: list[str], task_file: str | None, fmt: str | None) -> tuple[Task | None, list[Candidate]]:
    """The task (None: take it from the runs) and the candidates named on the command line."""
    if not paths:
        raise UserError("no candidates given: pass candidate files, a folder or a JSONL pool")
    if task_file is not None:
        return task_from_file(task_file), load_candidates(paths, fmt)
    if len(paths) >= 2 and Path(paths[0]).is_file():
        first = load_candidates([paths[0]])
        if len(first) == 1 and first[0].task is None and first[0].trajectory is None:
            return task_from_file(paths[0]), load_candidates(paths[1:], fmt)
    return None, load_candidates(paths, fmt)


def task_from_file(path: str) -> Task:
    return Task(text=read_text_input(path, "task"), id=Path(path).stem if path != "-" else "")


def default_criteria(candidates: list[Candidate]) -> str:
    return "agent" if any(c.trajectory and c.trajectory.steps for c in candidates) else "general"
