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

Where each source entry goes and which are answer keys: :mod:`.source_layout`; a full disk is one
sentence (:mod:`.disk_full`). Usage::

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

import random
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from veriscale.errors import UserError
from veriscale.harness.jsonfiles import write_json
from veriscale.harness.safe_fs import resolved
from veriscale.harness.workspace import contract as ws
from veriscale.harness.workspace.disk_full import disk_full_error
from veriscale.harness.workspace.office_content import refuse_office_files
from veriscale.harness.workspace.safe_copy import (
    DEFAULT_MAX_EXTRACT_BYTES,
    DISK_FULL_ERRNOS,
    copy_tree,
    ensure_inside,
    extract_zip,
)
from veriscale.harness.workspace.source_layout import (
    DEFAULT_ANSWER_KEY_PATTERNS,
    DEFAULT_ROLLOUT_EXCLUDE_PATTERNS,
    INPUT_DIR_CANDIDATES,
    collect_rollouts,
    find_task_file,
    keep_all,
    key_rule,
    read_scores,
    sort_top_level,
    split_rollout,
)
from veriscale.harness.workspace.text_views import is_viewable, write_view
from veriscale.harness.workspace.view_worker import ViewWorker
from veriscale.harness.workspace.zip_limits import ZipLimits


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


def _anonymise(names: list[str], seed: int) -> dict[str, str]:
    order = sorted(names)
    random.Random(seed).shuffle(order)
    width = max(2, len(str(len(order))))
    return {f"r{i:0{width}d}": name for i, name in enumerate(order, start=1)}



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
    spec_source = find_task_file(source, task_file)
    rollouts_src = source / ws.ROLLOUTS_DIR
    if not rollouts_src.is_dir():
        raise UserError(f"source '{source}' has no {ws.ROLLOUTS_DIR}/ folder: put one subfolder (or zip) per rollout there")

    left_out: list[tuple[str, str]] = []
    rollout_sources = collect_rollouts(rollouts_src, left_out)
    label_map = _anonymise(list(rollout_sources), seed)
    report = MaterializeReport(task_dir=str(dest), archive_file=str(archive_file), label_map=label_map)
    if len(label_map) == 1:
        report.warnings.append("only one rollout: there is nothing to compare, only the consensus challenger applies")

    recognised = {ws.ROLLOUTS_DIR, ws.SPEC_DIR, *INPUT_DIR_CANDIDATES}
    if spec_source.parent == source:
        recognised.add(spec_source.name)
    scores = read_scores(sort_top_level(source, recognised, key_patterns, left_out))

    staging: Path | None = None
    try:
        dest.mkdir(parents=True, exist_ok=True)
        spec_dir = dest / ws.SPEC_DIR
        if (source / ws.SPEC_DIR).is_dir():
            copy_tree(source / ws.SPEC_DIR, spec_dir, root=source, left_out=left_out,
                      rel_prefix=f"{ws.SPEC_DIR}/", skip=key_rule(key_patterns))
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
                                    rel_prefix=f"{name}/", skip=keep_all):
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
                    copy_tree(src, staged, root=source, left_out=left_out, rel_prefix=prefix, skip=keep_all)
                else:
                    ensure_inside(src, source)
                    extract_zip(src, staged, max_bytes=max_extract_bytes, limits=limits)
                staging = None
                _refuse_office_files(staged, left_out, report.warnings, limits, lambda rel, p=prefix: p + rel)
                split_rollout(staged, dest / ws.ROLLOUTS_DIR / label, left_out, prefix, rollout_patterns)

        with ViewWorker(limits) as worker:
            _write_views(inputs_dest, dest, report, worker)
            _write_views(dest / ws.ROLLOUTS_DIR, dest, report, worker)
    except OSError as exc:
        shutil.rmtree(dest, ignore_errors=True)
        if exc.errno in DISK_FULL_ERRNOS:
            raise disk_full_error(exc, source, dest, staging) from None
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
        raise disk_full_error(exc, source, dest) from None
    return report
