"""What a rollout folder holds besides its runs: its task file, its Harbor result, the names skipped.

Shared by the folder importer (``folder.py``) and the frames importer (``frames.py``), so neither
imports the other::

    task_file(Path("runs"))            # Task from runs/task.md (or task.txt, prompt.md, ...), else None
    merge_result(Path("runs/run-1"), candidate)   # labels from result.json / verifier/reward.txt
"""

from __future__ import annotations

from pathlib import Path

from veriscale.data.importers._files import read_text
from veriscale.data.model import Candidate, Task
from veriscale.data.reader import try_json
from veriscale.errors import UserError

TASK_FILE_NAMES = ("task.md", "task.txt", "instruction.md", "instructions.md", "prompt.md", "prompt.txt")
_SKIPPED_NAMES = {"readme.md", "__pycache__", "node_modules", ".git"}


def visible(path: Path) -> bool:
    return not path.name.startswith(".") and path.name.lower() not in _SKIPPED_NAMES


def task_file(folder: Path) -> Task | None:
    for name in TASK_FILE_NAMES:
        for candidate in (folder / name, folder / name.upper()):
            if candidate.is_file():
                text = read_text(candidate).strip()
                return Task(text=text, id=folder.name, metadata={"file": str(candidate)})
    return None


def merge_result(sub: Path, candidate: Candidate) -> None:
    """Labels from a Harbor ``result.json`` or ``verifier/reward.txt`` beside the trajectory."""
    result_path = sub / "result.json"
    if result_path.is_file():
        try:
            result = try_json(read_text(result_path))
        except UserError:
            result = None
        if isinstance(result, dict):
            rewards = (result.get("verifier_result") or {}).get("rewards") if isinstance(result.get("verifier_result"), dict) else None
            if isinstance(rewards, dict):
                for key, value in rewards.items():
                    candidate.labels.setdefault(key, value)
            for key in ("reward", "resolved", "score"):
                if key in result and result[key] is not None:
                    candidate.labels.setdefault(key, result[key])
            task_name = result.get("task_name")
            if task_name and candidate.task is not None and not candidate.task.id:
                candidate.task.id = str(task_name)
    reward_file = sub / "verifier" / "reward.txt"
    if reward_file.is_file() and "reward" not in candidate.labels:
        try:
            candidate.labels["reward"] = float(read_text(reward_file).strip())
        except (ValueError, UserError):
            pass  # no number in it: no reward label
