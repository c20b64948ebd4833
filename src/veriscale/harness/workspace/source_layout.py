"""The source layout materialize reads: where each entry of a source folder goes, and what is left out.

    from veriscale.harness.workspace.source_layout import (
        DEFAULT_ANSWER_KEY_PATTERNS, collect_rollouts, find_task_file, sort_top_level, split_rollout,
    )

    task_md = find_task_file(source, None)              # task.md, spec/task.md, TASK.md, ... or a UserError
    left_out: list[tuple[str, str]] = []
    rollouts = collect_rollouts(source / "rollouts", left_out)   # {"opus-run-3": <folder or zip>, ...}
    score_files = sort_top_level(source, {"rollouts", "spec", "inputs", "workspace", "task.md"},
                                 DEFAULT_ANSWER_KEY_PATTERNS, left_out)   # left_out: [("golden.xlsx", "answer-key pattern 'golden*'")]
    split_rollout(staged, dest / "rollouts" / "r01", left_out, "rollouts/opus-run-3/", DEFAULT_ROLLOUT_EXCLUDE_PATTERNS)

Names match patterns case-insensitively (:func:`match_pattern`). A rollout's files go to
``deliverables/`` and ``trajectory/`` (trajectory-named files, or its own folders of those names);
grader outputs and old view sidecars are left out, each with its reason.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path
from typing import Any, Sequence

from veriscale.data.reader import parse_json, read_text
from veriscale.errors import UserError, setting
from veriscale.harness.workspace import contract as ws
from veriscale.harness.workspace.safe_copy import ensure_inside
from veriscale.harness.workspace.text_views import SIDECAR_SUFFIX, is_sidecar

DEFAULT_ANSWER_KEY_PATTERNS: tuple[str, ...] = (
    "golden*", "gold", "gold.*", "solution", "solution.*", "solutions", "tests", "test",
    "expected*", "answer*", "task.toml", "grader*", "grading*", "rubric*", "reference*",
    "oracle*", "ground_truth*", "groundtruth*", "scores.json", "*.scores.json",
)
DEFAULT_ROLLOUT_EXCLUDE_PATTERNS: tuple[str, ...] = (
    "score.json", "scores.json", "*.scores.json", "reward.txt", "reward.json",
    "grading*", "grader*", "verifier",
)
TASK_FILE_CANDIDATES = ("task.md", "spec/task.md", "TASK.md", "instruction.md", "prompt.md")
INPUT_DIR_CANDIDATES = ("inputs", "workspace")
TRAJECTORY_PATTERNS = ("trajectory*", "trace*", "transcript*", "*.trajectory.json", "*.trajectory.jsonl")
SCORE_FILE_PATTERNS = ("scores.json", "*.scores.json")


def match_pattern(name: str, patterns: Sequence[str]) -> str | None:
    lowered = name.lower()
    for pattern in patterns:
        if fnmatch.fnmatchcase(lowered, pattern.lower()):
            return pattern
    return None


def key_rule(patterns: Sequence[str]):
    """A copy_tree skip rule that leaves out entries named like an answer key."""

    def skip(rel: str, _is_dir: bool) -> str | None:
        pattern = match_pattern(rel.rsplit("/", 1)[-1], patterns)
        return f"answer-key pattern '{pattern}'" if pattern else None

    return skip


def keep_all(_rel: str, _is_dir: bool) -> None:
    return None


def find_task_file(source: Path, task_file: Path | None) -> Path:
    if task_file is not None:
        if not task_file.is_file():
            raise UserError(f"task description '{task_file}' does not exist: give the task's markdown file")
        return task_file
    for candidate in TASK_FILE_CANDIDATES:
        if (source / candidate).is_file():
            ensure_inside(source / candidate, source)
            return source / candidate
    raise UserError(
        f"source '{source}' has no task description (looked for {', '.join(TASK_FILE_CANDIDATES)}): "
        f"add task.md or give {setting('task_file')}"
    )


def read_scores(files: list[Path]) -> dict[str, Any]:
    scores: dict[str, Any] = {}
    for path in files:
        try:
            data = parse_json(read_text(path, "scores file"), f"scores file '{path}'")
        except json.JSONDecodeError as exc:
            raise UserError(f"scores file '{path}' is not valid JSON ({exc}): fix or remove it") from exc
        if isinstance(data, dict) and isinstance(data.get("scores"), dict):
            data = data["scores"]
        if not isinstance(data, dict):
            raise UserError(f"scores file '{path}' must map rollout names to scores: fix or remove it")
        scores.update(data)
    return scores


def split_rollout(staged: Path, dest: Path, left_out: list[tuple[str, str]], prefix: str,
                   rollout_patterns: Sequence[str]) -> None:
    """Move a staged rollout into deliverables/ and trajectory/."""
    deliverables = dest / ws.DELIVERABLES_DIR
    trajectory = dest / ws.TRAJECTORY_DIR
    deliverables.mkdir(parents=True)
    trajectory.mkdir(parents=True)
    has_layout = (staged / ws.DELIVERABLES_DIR).is_dir()
    for entry in sorted(staged.iterdir()):
        name = entry.name
        pattern = match_pattern(name, rollout_patterns)
        if pattern is not None:
            left_out.append((f"{prefix}{name}", f"grader output pattern '{pattern}'"))
            continue
        if name == ws.TRAJECTORY_DIR and entry.is_dir():
            shutil.copytree(entry, trajectory, dirs_exist_ok=True)
        elif has_layout and name == ws.DELIVERABLES_DIR:
            shutil.copytree(entry, deliverables, dirs_exist_ok=True)
        elif entry.is_file() and match_pattern(name, TRAJECTORY_PATTERNS):
            shutil.copyfile(entry, trajectory / name)
        elif has_layout:
            left_out.append((f"{prefix}{name}", "outside the rollout's deliverables/ and trajectory/"))
        elif entry.is_dir():
            shutil.copytree(entry, deliverables / name)
        else:
            shutil.copyfile(entry, deliverables / name)
    for stale in [p for p in deliverables.rglob(f"*{SIDECAR_SUFFIX}") if is_sidecar(p)]:
        left_out.append((f"{prefix}{stale.relative_to(deliverables).as_posix()}", "old view sidecar (rebuilt)"))
        stale.unlink()


def collect_rollouts(rollouts_src: Path, left_out: list[tuple[str, str]]) -> dict[str, Path]:
    """{rollout name: folder or zip} from the source's rollouts/ folder."""
    found: dict[str, Path] = {}
    for entry in sorted(rollouts_src.iterdir()):
        is_zip = entry.is_file() and entry.suffix.lower() == ".zip"
        if not (entry.is_dir() or is_zip):
            left_out.append((f"{ws.ROLLOUTS_DIR}/{entry.name}", "not a rollout folder or zip"))
            continue
        name = entry.stem if is_zip else entry.name
        if name in found:
            raise UserError(f"rollout '{name}' exists both as a folder and as a zip in '{rollouts_src}': keep one")
        found[name] = entry
    if not found:
        raise UserError(f"source '{rollouts_src}' holds no rollouts: add one subfolder (or zip) per rollout")
    return found


def sort_top_level(source: Path, recognised: set[str], key_patterns: Sequence[str],
                    left_out: list[tuple[str, str]]) -> list[Path]:
    """Report every top-level entry outside the layout as left out; return the score files."""
    score_files: list[Path] = []
    for entry in sorted(source.iterdir()):
        if entry.name in recognised:  # the layout itself is never an answer key
            continue
        if entry.is_file() and match_pattern(entry.name, SCORE_FILE_PATTERNS):
            score_files.append(entry)
            left_out.append((entry.name, "archived scores (moved to the archive outside the task)"))
            continue
        pattern = match_pattern(entry.name, key_patterns)
        reason = f"answer-key pattern '{pattern}'" if pattern else "not part of the source layout"
        left_out.append((entry.name + ("/" if entry.is_dir() else ""), reason))
    return score_files

