"""Pools of candidates grouped by task, from files, folders or JSONL pools.

    from veriscale.data.pool import load_pool, load_selection

    pool = load_pool(["terminal_bench_2.1_trials.jsonl.gz"])   # many tasks in one file
    for task_id, group in pool.items():
        group.task, group.candidates                           # Task | None, [Candidate]

    task, candidates = load_selection(["a.md", "b.md"], task=Task("Write a haiku"))

``load_selection`` is for one Best-of-N choice: it refuses an empty pool and candidates of
different tasks. Candidate ids are made unique within a task (``id@source`` on a clash).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable, NamedTuple

from veriscale.data.importers import load_candidates
from veriscale.data.model import Candidate, Task
from veriscale.errors import UserError, setting


class TaskGroup(NamedTuple):
    """The candidates of one task; ``task`` is None when no file said what the task was."""

    task: Task | None
    candidates: list[Candidate]


def task_key(task: Task | None) -> str:
    """The grouping key of a task: its id, else a short hash of its text, else ``""``."""
    if task is None:
        return ""
    if task.id:
        return task.id
    if task.text:
        return "task-" + hashlib.sha1(task.text.encode("utf-8")).hexdigest()[:10]
    return ""


def group_by_task(candidates: Iterable[Candidate]) -> dict[str, TaskGroup]:
    """Split candidates by ``candidate.task``, in order of first appearance."""
    groups: dict[str, TaskGroup] = {}
    for candidate in candidates:
        key = task_key(candidate.task)
        if key not in groups:
            groups[key] = TaskGroup(candidate.task, [])
        groups[key].candidates.append(candidate)
    for group in groups.values():
        _make_ids_unique(group.candidates)
    return groups


def _make_ids_unique(candidates: list[Candidate]) -> None:
    seen: dict[str, int] = {}
    for candidate in candidates:
        seen[candidate.id] = seen.get(candidate.id, 0) + 1
    clashing = {cid for cid, count in seen.items() if count > 1}
    used: set[str] = set()
    for index, candidate in enumerate(candidates):
        if candidate.id in clashing:
            new_id = f"{candidate.id}@{candidate.source}" if candidate.source else candidate.id
            if new_id in used:
                new_id = f"{candidate.id}#{index + 1}"
            candidate.id = new_id
        used.add(candidate.id)


def load_pool(paths: Iterable[str | Path], format: str | None = None) -> dict[str, TaskGroup]:
    """Load candidate files or folders and group them by task: ``{task_id: TaskGroup}``."""
    candidates = load_candidates(paths, format)
    if not candidates:
        raise UserError("the candidate files hold no candidates: give at least one run")
    return group_by_task(candidates)


def require_single_task(candidates: list[Candidate], task: Task | None = None) -> TaskGroup:
    """The one task all ``candidates`` answer; ``task`` (``--task``) overrides the tasks they carry, even
    when they differ; without it, candidates of different tasks are a ``UserError``."""
    if not candidates:
        raise UserError("no candidates to choose from: give at least one candidate file")
    if task is not None:
        candidates = list(candidates)
        _make_ids_unique(candidates)  # ids are unique within one task; these now answer one
        return TaskGroup(task, candidates)
    groups = group_by_task(candidates)
    known = {key: group for key, group in groups.items() if key}
    if len(known) > 1:
        names = ", ".join(repr(k) for k in list(known)[:5])
        more = f" and {len(known) - 5} more" if len(known) > 5 else ""
        raise UserError(
            f"the candidates answer {len(known)} different tasks ({names}{more}): select among "
            f"runs of one task, give the one task with {setting('task')} FILE, or use a pool command that splits by task"
        )
    if task is None and known:
        task = next(iter(known.values())).task
    return TaskGroup(task, list(candidates))


def load_selection(
    paths: Iterable[str | Path], task: Task | None = None, format: str | None = None
) -> TaskGroup:
    """Load the candidates of one selection; they must all answer one task.

    ``task`` (e.g. from ``--task``) is used when the files do not carry it, and overrides
    the task text they carry; it is None only when neither says what the task is.
    """
    candidates = load_candidates(paths, format)
    return require_single_task(candidates, task)
