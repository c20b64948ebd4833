"""Build a task workspace (see :mod:`.contract`) from a folder of rollouts, leaving answer keys out.

Source layout (what benchmark exports and ``veriscale`` fixtures look like)::

    <source>/
      task.md  (or spec/task.md, TASK.md, instruction.md, prompt.md)
      inputs/  and/or workspace/      files the rollouts worked with -> <task>/workspace/
      spec/                           other task documents            -> <task>/spec/
      rollouts/<name>/                deliverables + optional trajectory file or folder
      rollouts/<name>.zip             the same, zipped
      scores.json / *.scores.json     archived scores {name: score}    -> archive, outside
      golden.xlsx, tests/, ...        answer keys                      -> left out, reported

Usage::

    report = materialize(Path("exports/finance"), Path("tasks/finance"), seed=7)
    report.left_out      # [("golden.xlsx", "answer-key pattern 'golden*'"), ...]
    report.label_map     # {"r01": "opus-run-3", ...}; also in tasks/finance.scores.json

Top-level entries of the source (and anything in ``spec/``) whose names match an answer-key
pattern are never copied (the layout names themselves, task.md/spec/inputs/workspace/rollouts,
are exempt); other unrecognised top-level entries are left out too (reason "not part of the
source layout"), since an unknown file beside the task is as likely a key as an input. Inside a
rollout, grader outputs (``score.json``, ``reward.txt``, ...) are left out. Every copied file
goes through the one content check of office files (:mod:`.office_content`): an office file that
points outside itself (an external workbook link, an external relationship other than a
hyperlink, a formula into another workbook, a DTD) is left out and reported in one sentence,
as a warning too. Rollout names are
replaced by r01, r02, ... in a seeded shuffled order so a session cannot tell runs apart by
name or listing order; the map back lives only in the archive file outside the task folder.
One rollout is allowed (the challenger can still work) but reported as a warning.
"""

from __future__ import annotations

import fnmatch
import json
import os
import random
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from veriscale.data.reader import parse_json, read_text
from veriscale.errors import UserError, setting
from veriscale.harness.workspace import contract as ws
from veriscale.harness.jsonfiles import write_json
from veriscale.harness.workspace.office_content import refuse_office_files
from veriscale.harness.safe_fs import resolved
from veriscale.harness.workspace.safe_copy import (
    DEFAULT_MAX_EXTRACT_BYTES, DISK_FULL_ERRNOS, copy_tree, ensure_inside, extract_zip,
)
from veriscale.harness.workspace.view_worker import ViewWorker
from veriscale.harness.workspace.text_views import SIDECAR_SUFFIX, is_sidecar, is_viewable, write_view
from veriscale.harness.workspace.zip_limits import ZipLimits

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


@dataclass
class MaterializeReport:
    """What ``materialize`` built, moved outside, and left out (with reasons)."""

    task_dir: str
    archive_file: str
    label_map: dict[str, str]
    left_out: list[tuple[str, str]] = field(default_factory=list)
    views: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["left_out"] = [{"path": p, "reason": r} for p, r in self.left_out]
        return data


def _match(name: str, patterns: Sequence[str]) -> str | None:
    lowered = name.lower()
    for pattern in patterns:
        if fnmatch.fnmatchcase(lowered, pattern.lower()):
            return pattern
    return None


def _key_rule(patterns: Sequence[str]):
    """A copy_tree skip rule that leaves out entries named like an answer key."""

    def skip(rel: str, _is_dir: bool) -> str | None:
        pattern = _match(rel.rsplit("/", 1)[-1], patterns)
        return f"answer-key pattern '{pattern}'" if pattern else None

    return skip


def _keep_all(_rel: str, _is_dir: bool) -> None:
    return None


def _anonymise(names: list[str], seed: int) -> dict[str, str]:
    order = sorted(names)
    random.Random(seed).shuffle(order)
    width = max(2, len(str(len(order))))
    return {f"r{i:0{width}d}": name for i, name in enumerate(order, start=1)}


def _find_task_file(source: Path, task_file: Path | None) -> Path:
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


def _read_scores(files: list[Path]) -> dict[str, Any]:
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


def _split_rollout(staged: Path, dest: Path, left_out: list[tuple[str, str]], prefix: str,
                   rollout_patterns: Sequence[str]) -> None:
    """Move a staged rollout into deliverables/ and trajectory/."""
    deliverables = dest / ws.DELIVERABLES_DIR
    trajectory = dest / ws.TRAJECTORY_DIR
    deliverables.mkdir(parents=True)
    trajectory.mkdir(parents=True)
    has_layout = (staged / ws.DELIVERABLES_DIR).is_dir()
    for entry in sorted(staged.iterdir()):
        name = entry.name
        pattern = _match(name, rollout_patterns)
        if pattern is not None:
            left_out.append((f"{prefix}{name}", f"grader output pattern '{pattern}'"))
            continue
        if name == ws.TRAJECTORY_DIR and entry.is_dir():
            shutil.copytree(entry, trajectory, dirs_exist_ok=True)
        elif has_layout and name == ws.DELIVERABLES_DIR:
            shutil.copytree(entry, deliverables, dirs_exist_ok=True)
        elif entry.is_file() and _match(name, TRAJECTORY_PATTERNS):
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


def _collect_rollouts(rollouts_src: Path, left_out: list[tuple[str, str]]) -> dict[str, Path]:
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


def _sort_top_level(source: Path, recognised: set[str], key_patterns: Sequence[str],
                    left_out: list[tuple[str, str]]) -> list[Path]:
    """Report every top-level entry outside the layout as left out; return the score files."""
    score_files: list[Path] = []
    for entry in sorted(source.iterdir()):
        if entry.name in recognised:  # the layout itself is never an answer key
            continue
        if entry.is_file() and _match(entry.name, SCORE_FILE_PATTERNS):
            score_files.append(entry)
            left_out.append((entry.name, "archived scores (moved to the archive outside the task)"))
            continue
        pattern = _match(entry.name, key_patterns)
        reason = f"answer-key pattern '{pattern}'" if pattern else "not part of the source layout"
        left_out.append((entry.name + ("/" if entry.is_dir() else ""), reason))
    return score_files


def _refuse_office_files(folder: Path, report_left_out: list[tuple[str, str]], warnings: list[str], limits: ZipLimits,
                         shown) -> None:
    """Leave out every office file below ``folder`` that points outside itself (its view says why
    when it could not be checked, so such a file is kept)."""
    for _rel, refusal in refuse_office_files(folder, limits, shown=shown, unchecked=False):
        report_left_out.append((refusal.what, refusal.sentence))
        warnings.append(refusal.sentence)


def _write_views(folder: Path, task_dir: Path, report: MaterializeReport, worker: ViewWorker) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and is_viewable(path):
            sidecar, view = write_view(path, worker.render(path))
            rel = sidecar.relative_to(task_dir).as_posix()
            report.views.append(rel)
            if view.refused:
                report.warnings.append(f"{path.relative_to(task_dir).as_posix()} was not viewed: {view.refused}")
            elif view.error:
                report.warnings.append(f"{path.relative_to(task_dir).as_posix()} could not be read: {view.error}")
            elif view.truncated:
                report.warnings.append(f"{rel} is truncated (file over the view cap)")


def materialize(
    source: Path,
    dest: Path,
    *,
    seed: int = 0,
    task_file: Path | None = None,
    exclude_patterns: Sequence[str] | None = None,
    extra_exclude_patterns: Sequence[str] = (),
    rollout_exclude_patterns: Sequence[str] | None = None,
    archive_dir: Path | None = None,
    max_extract_bytes: int = DEFAULT_MAX_EXTRACT_BYTES,
    zip_limits: ZipLimits | None = None,
) -> MaterializeReport:
    """Build the task folder ``dest`` from ``source``; see the module docstring for the layout.

    ``exclude_patterns`` replaces the answer-key patterns, ``extra_exclude_patterns`` adds to
    them. The archive (scores, label map, this report) is written to
    ``<archive_dir or dest.parent>/<dest.name>.scores.json``. ``zip_limits`` (default: the
    ``VERISCALE_ZIP_*`` settings) caps what views inflate; a file over a cap is a warning.
    """
    limits = zip_limits or ZipLimits.from_env()
    source, dest = Path(source), Path(dest)
    if not source.is_dir():
        raise UserError(f"source folder '{source}' does not exist: give the folder that holds task.md and rollouts/")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError(f"destination '{dest}' already exists and is not empty: choose a new folder or delete it")
    real_source, real_dest = resolved(source, "source folder"), resolved(dest, "destination")
    if real_dest == real_source or real_source in real_dest.parents:
        raise UserError(f"destination '{dest}' is inside the source folder '{source}': choose a folder outside it")
    archive_file = ws.archive_path(dest, archive_dir)
    if real_dest in resolved(archive_file, "archive file").parents:
        raise UserError(f"archive folder '{archive_file.parent}' is inside the task folder: scores must live outside it")

    key_patterns = tuple(exclude_patterns if exclude_patterns is not None else DEFAULT_ANSWER_KEY_PATTERNS)
    key_patterns += tuple(extra_exclude_patterns)
    rollout_patterns = tuple(
        rollout_exclude_patterns if rollout_exclude_patterns is not None else DEFAULT_ROLLOUT_EXCLUDE_PATTERNS
    )
    spec_source = _find_task_file(source, task_file)
    rollouts_src = source / ws.ROLLOUTS_DIR
    if not rollouts_src.is_dir():
        raise UserError(f"source '{source}' has no {ws.ROLLOUTS_DIR}/ folder: put one subfolder (or zip) per rollout there")

    left_out: list[tuple[str, str]] = []
    rollout_sources = _collect_rollouts(rollouts_src, left_out)
    label_map = _anonymise(list(rollout_sources), seed)
    report = MaterializeReport(task_dir=str(dest), archive_file=str(archive_file), label_map=label_map)
    if len(label_map) == 1:
        report.warnings.append("only one rollout: there is nothing to compare, only the consensus challenger applies")

    recognised = {ws.ROLLOUTS_DIR, ws.SPEC_DIR, *INPUT_DIR_CANDIDATES}
    if spec_source.parent == source:
        recognised.add(spec_source.name)
    scores = _read_scores(_sort_top_level(source, recognised, key_patterns, left_out))

    staging: Path | None = None
    try:
        dest.mkdir(parents=True, exist_ok=True)
        spec_dir = dest / ws.SPEC_DIR
        if (source / ws.SPEC_DIR).is_dir():
            copy_tree(source / ws.SPEC_DIR, spec_dir, root=source, left_out=left_out,
                      rel_prefix=f"{ws.SPEC_DIR}/", skip=_key_rule(key_patterns))
        spec_dir.mkdir(exist_ok=True)
        shutil.copyfile(spec_source, spec_dir / ws.TASK_FILE)
        _refuse_office_files(spec_dir, left_out, report.warnings, limits,
                             lambda rel: ws.TASK_FILE if rel == ws.TASK_FILE else f"{ws.SPEC_DIR}/{rel}")

        inputs_dest = dest / ws.INPUTS_DIR
        inputs_dest.mkdir()
        seen_inputs: dict[str, str] = {}
        for name in INPUT_DIR_CANDIDATES:
            folder = source / name
            if not folder.is_dir():
                continue
            for copied in copy_tree(folder, inputs_dest, root=source, left_out=left_out,
                                    rel_prefix=f"{name}/", skip=_keep_all):
                rel = copied.relative_to(inputs_dest).as_posix()
                if rel in seen_inputs:
                    raise UserError(
                        f"input '{rel}' exists in both {seen_inputs[rel]}/ and {name}/ of '{source}': keep one"
                    )
                seen_inputs[rel] = name
        _refuse_office_files(inputs_dest, left_out, report.warnings, limits,
                             lambda rel: f"{seen_inputs.get(rel, ws.INPUTS_DIR)}/{rel}")

        with tempfile.TemporaryDirectory(prefix="veriscale-stage-") as staging_root:
            for label, original in label_map.items():
                src = rollout_sources[original]
                staged = Path(staging_root) / label
                prefix = f"{ws.ROLLOUTS_DIR}/{src.name}/"
                staging = Path(staging_root)  # a full disk now is the temporary folder's
                if src.is_dir():
                    copy_tree(src, staged, root=source, left_out=left_out, rel_prefix=prefix, skip=_keep_all)
                else:
                    ensure_inside(src, source)
                    extract_zip(src, staged, max_bytes=max_extract_bytes, limits=limits)
                staging = None
                _refuse_office_files(staged, left_out, report.warnings, limits, lambda rel, p=prefix: p + rel)
                _split_rollout(staged, dest / ws.ROLLOUTS_DIR / label, left_out, prefix, rollout_patterns)

        with ViewWorker(limits) as worker:
            _write_views(inputs_dest, dest, report, worker)
            _write_views(dest / ws.ROLLOUTS_DIR, dest, report, worker)
    except OSError as exc:
        shutil.rmtree(dest, ignore_errors=True)
        if exc.errno in DISK_FULL_ERRNOS:
            raise _disk_full(exc, source, dest, staging) from None
        raise
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise

    report.left_out = left_out
    unknown = sorted(set(scores) - set(label_map.values()))
    if unknown:
        report.warnings.append(f"scores for unknown rollouts ignored: {', '.join(map(str, unknown))}")
    archive = {
        "task": dest.name,
        "source": str(source),
        "seed": seed,
        "label_map": label_map,
        "scores": {label: scores.get(original) for label, original in label_map.items()},
        "materialize": report.to_dict(),
    }
    try:
        write_json(archive_file, archive)
    except OSError as exc:
        if exc.errno not in DISK_FULL_ERRNOS:
            raise
        shutil.rmtree(dest, ignore_errors=True)  # a task without its label map cannot be scored
        raise _disk_full(exc, source, dest) from None
    return report


def _human(size: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover


def _source_bytes(source: Path) -> int:
    """The bytes of the regular files below ``source`` (links not followed): what the copies need at least."""
    total = 0
    for folder, _dirs, files in os.walk(source):
        for name in files:
            try:
                info = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            total += info.st_size if os.path.isfile(os.path.join(folder, name)) else 0
    return total


def _disk_full(exc: OSError, source: Path, dest: Path, staging: Path | None = None) -> UserError:
    """One sentence for a write that ran out of space: where, how much is needed, and that nothing is left behind.

    ``staging``: the temporary folder rollouts were being copied into when the disk filled (else the
    destination's disk was full)."""
    if staging is not None:
        disk, fix = staging.parent, "free space there or point $TMPDIR at a larger disk"
    else:
        disk = next((p for p in (dest, *dest.parents) if p.is_dir()), dest)
        fix = "free space there or choose a destination on a larger disk"
    try:
        free = f", {_human(shutil.disk_usage(disk).free)} free"
    except OSError:
        free = ""
    return UserError(
        f"no space left on the disk of '{disk}' while building task folder '{dest}' "
        f"(it needs at least {_human(_source_bytes(source))}, the size of source '{source}', plus its text views{free}): "
        f"{fix}; the partial task folder was removed"
    )
