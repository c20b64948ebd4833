"""A folder of rollouts: each subfolder (or, with no subfolders, each file) is one candidate.

    runs/
      task.md                  # optional: the task, for candidates whose files do not carry it
      run-1/                   # one rollout: a trajectory file, an answer, deliverables
        agent/trajectory.json  #   read by its own format (ATIF, SWE-agent, messages, ...)
        result.json            #   Harbor result: verifier_result.rewards -> labels
        report.xlsx            #   every file is listed in Candidate.artifacts
      run-2/ ...
      run-3/                   # only images (or one video) and a task file: the frames importer
        frame1.png frame2.png  #   (frames.py) makes it one candidate with those images

In a folder with subfolders, loose files other than the task file are ignored (a Harbor job
folder keeps its config.json and result.json there). In a folder of files only, each file is
loaded by its format and all must share one format. Hidden files and ``.git`` are skipped.

    load(Path("runs")) -> [Candidate, ...]
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import Any, NamedTuple

from veriscale.data.importers._files import (
    DIFF_SUFFIXES,
    JSON_SUFFIXES,
    JSONL_SUFFIXES,
    TEXT_SUFFIXES,
    logical_suffix,
    read_text,
)
from veriscale.data.importers import frames
from veriscale.data.importers._rollout import TASK_FILE_NAMES, merge_result, task_file, visible
from veriscale.data.model import Candidate
from veriscale.errors import UserError

NAME = "folder"
DESCRIPTION = "a folder of rollouts (each subfolder or file is one candidate)"

ANSWER_FILE_STEMS = ("answer", "final", "output", "response", "result", "solution", "submission")
MAX_ARTIFACTS = 2000


def detect(obj: Any) -> bool:
    """True for an existing directory."""
    return isinstance(obj, Path) and obj.is_dir()


class Readers(NamedTuple):
    """What a folder's files are read with: the importer registry's own functions (it passes them,
    so this module never imports the registry that lists it)."""

    files: Callable[[list[Path]], list[Candidate]]        # load_candidates
    one_file: Callable[[Path], tuple[str, list[Candidate]]]  # load_file: (format name, candidates)
    record_formats: frozenset[str]                          # names of the record importers


def load(obj: Path, source: str = "", *, readers: Readers) -> list[Candidate]:
    """One candidate per subfolder (or per file when there are no subfolders)."""
    folder = Path(obj)
    if not folder.is_dir():
        raise UserError(f"'{folder}' is not a folder: give a folder of rollouts")
    task = task_file(folder)
    task_names = {n.lower() for n in TASK_FILE_NAMES}
    entries = sorted((p for p in folder.iterdir() if visible(p)), key=lambda p: p.name)
    subfolders = [p for p in entries if p.is_dir()]
    if subfolders:
        candidates = [_rollout(sub, readers) for sub in subfolders]
    else:
        files = [p for p in entries if p.is_file() and p.name.lower() not in task_names]
        if not files:
            raise UserError(f"folder '{folder}' holds no candidate files or rollout subfolders: add some")
        candidates = readers.files(files)
    for candidate in candidates:
        if candidate.task is None and task is not None:
            candidate.task = task
    return candidates


def _files_under(root: Path) -> list[Path]:
    found: list[Path] = []
    stack = [root]
    while stack and len(found) < MAX_ARTIFACTS:
        current = stack.pop()
        for entry in sorted(current.iterdir(), key=lambda p: p.name, reverse=True):
            if not visible(entry):
                continue
            if entry.is_dir():
                if not entry.is_symlink():  # a linked folder may lead back up: never followed
                    stack.append(entry)
            elif entry.is_file():
                found.append(entry)
    return sorted(found, key=lambda p: (len(p.relative_to(root).parts), str(p)))


def _rollout(sub: Path, readers: Readers) -> Candidate:
    """One rollout subfolder as one candidate (id = folder name)."""
    files = _files_under(sub)
    if not files:
        raise UserError(f"rollout folder '{sub}' is empty: remove it or add the run's files")
    artifacts = {str(p.relative_to(sub)): str(p) for p in files}
    candidate: Candidate | None = None

    if frames.is_frames_folder(sub):  # screenshots or camera frames, or one video
        candidate = frames.load(sub)[0]
    for path in files if candidate is None else []:
        if logical_suffix(path) not in JSON_SUFFIXES | JSONL_SUFFIXES or path.name == "result.json":
            continue
        try:
            name, loaded = readers.one_file(path)
        except UserError:
            continue  # a deliverable that happens to be JSON, not a trajectory
        if name in readers.record_formats and len(loaded) == 1:
            candidate = loaded[0]
            break
    if candidate is None:
        candidate = Candidate(id=sub.name, text=_answer_text(sub, files))
    candidate.id = sub.name
    candidate.source = str(sub)
    candidate.artifacts = {**artifacts, **candidate.artifacts}
    merge_result(sub, candidate)
    if candidate.task is None:
        candidate.task = task_file(sub)
    return candidate


def _answer_text(sub: Path, files: list[Path]) -> str:
    """Text of the rollout's answer file (answer.md, output.txt, a patch, ...), else ''."""
    readable = [p for p in files if logical_suffix(p) in TEXT_SUFFIXES | DIFF_SUFFIXES]
    readable = [p for p in readable if p.name.lower() not in TASK_FILE_NAMES]
    for path in readable:
        if path.name.lower().split(".")[0] in ANSWER_FILE_STEMS:
            return read_text(path)
    if len(readable) == 1:
        return read_text(readable[0])
    return ""
