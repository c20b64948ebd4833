"""Read candidate runs from files and folders, telling the format from the content.

    from veriscale.data.importers import load_candidates, detect_format
    detect_format("trials.jsonl.gz")                 # -> "atif"
    cands = load_candidates(["a.md", "b.md"])        # text answers
    cands = load_candidates(["trials.jsonl.gz"])     # one Candidate per trial, each with .task

One module per format; each is an :class:`~veriscale.data.importers.importer.Importer`:
``NAME``, ``DESCRIPTION``, ``detect(obj) -> bool`` and ``load(obj, source) -> list[Candidate]``. JSON formats are detected on a parsed record (the
whole JSON file, or each JSONL line); file formats (diff, text, ``.eval``, a video) on the path.
Files given together must share one format; when nothing matches, the ``UserError`` names
the file and every known format.

Importers can come from other installed distributions, through the entry point group
``veriscale.importers``: each entry point is a module with the same four names, and
``READS = "files"`` when its ``detect`` takes a path (default ``"records"``). Plugin record
importers are tried after the built-in ones, plugin file importers before them::

    [project.entry-points."veriscale.importers"]
    myformat = "veriscale_myformat.importer"
"""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable

from veriscale.data.importers import (
    atif,
    diff,
    folder,
    frames,
    inspect_log,
    mini_swe_agent,
    openai_messages,
    step_solutions,
    swe_agent,
    swebench_predictions,
    text,
)
from veriscale.data.importers._files import (
    DIFF_SUFFIXES,
    check_regular,
    JSON_SUFFIXES,
    JSONL_SUFFIXES,
    TEXT_SUFFIXES,
    logical_suffix,
    looks_like_json,
    parse_records,
    read_text,
)
from veriscale.data.importers.importer import Importer, checked_importer, reads_files
from veriscale.data.reader import shown
from veriscale.data.model import Candidate
from veriscale.errors import UserError
from veriscale.plugins import plugins

# Order matters: the first module whose detect() accepts a record wins.
RECORD_IMPORTERS: list[Importer] = [
    atif,
    swe_agent,
    mini_swe_agent,
    inspect_log,
    swebench_predictions,
    step_solutions,
    openai_messages,
]
FILE_IMPORTERS: list[Importer] = [inspect_log, diff, text]
FORMATS: dict[str, Importer | ModuleType] = {  # the folder importer also takes its readers
    m.NAME: m for m in [*RECORD_IMPORTERS, diff, text, folder, frames]
}

__all__ = ["FORMATS", "detect_format", "load_candidates", "load_file", "known_formats", "load_plugins"]
PLUGIN_GROUP = "veriscale.importers"


def load_plugins() -> None:
    """Add the importers of every installed ``veriscale.importers`` entry point (once a process): a
    module with NAME, DESCRIPTION, detect and load (and READS = "files" for a whole-file reader)."""
    for name, value, found in plugins(PLUGIN_GROUP, "importer"):
        module = checked_importer(found, f"'{name}' ({value})")
        if module.NAME in FORMATS:
            continue  # a built-in (or an earlier plugin) keeps its name
        FORMATS[module.NAME] = module
        if reads_files(module):
            FILE_IMPORTERS.insert(0, module)
        else:
            RECORD_IMPORTERS.append(module)


def known_formats() -> str:
    """One line listing every format name and what it reads (for error messages and --help)."""
    load_plugins()
    return "; ".join(f"{name} ({module.DESCRIPTION})" for name, module in FORMATS.items())


def _unknown(path: Path, why: str = "") -> UserError:
    reason = f" ({why})" if why else ""
    return UserError(
        f"cannot tell the format of '{path}'{reason}: veriscale reads {known_formats()}; "
        "convert the file or name its format explicitly"
    )


def _format_module(name: str) -> ModuleType:
    load_plugins()
    if name not in FORMATS:
        raise UserError(f"unknown format '{shown(name)}': choose one of {', '.join(FORMATS)}")
    return FORMATS[name]


def _record_importer(record: Any, path: Path, line: int) -> ModuleType:
    for module in RECORD_IMPORTERS:
        if module.detect(record):
            return module
    where = f"'{path}'" if line <= 1 else f"'{path}' line {line}"
    keys = ", ".join(shown(k, 30) for k in list(record)[:8]) if isinstance(record, dict) else type(record).__name__
    raise _unknown(path, f"{where} holds {{{keys}}}" if isinstance(record, dict) else f"{where} holds a {keys}")


def load_file(path: str | Path, format: str | None = None) -> tuple[str, list[Candidate]]:
    """Load one file or folder; return ``(format name, candidates)``.

    ``format`` forces a format by name (see ``FORMATS``); by default it is detected.
    """
    load_plugins()
    path = Path(path)
    if not path.exists():
        raise UserError(f"candidate path '{path}' does not exist: check the path")
    if path.is_dir():
        if format == frames.NAME or (format is None and frames.detect(path)):  # images, or one video
            return frames.NAME, frames.load(path, str(path))
        if format not in (None, folder.NAME):
            raise UserError(f"'{path}' is a folder but format '{shown(format)}' reads files: drop the format")
        readers = folder.Readers(load_candidates, load_file, frozenset(m.NAME for m in RECORD_IMPORTERS))
        return folder.NAME, folder.load(path, readers=readers)
    check_regular(path)  # a FIFO or device is refused before any importer opens it
    forced = _format_module(format) if format else None
    if forced in (text, diff, frames) or (forced is inspect_log and inspect_log.detect(path)):
        return forced.NAME, forced.load(path, str(path))

    suffix = logical_suffix(path)
    if forced is None:
        if frames.detect(path):  # a video: its frames
            return frames.NAME, frames.load(path, str(path))
        if suffix in TEXT_SUFFIXES:
            return text.NAME, text.load(path, str(path))
        if suffix in DIFF_SUFFIXES:
            return diff.NAME, diff.load(path, str(path))
        if inspect_log.detect(path):
            return inspect_log.NAME, inspect_log.load(path, str(path))
    content = read_text(path)
    if suffix in JSON_SUFFIXES or suffix in JSONL_SUFFIXES or looks_like_json(content):
        return _load_records(path, content, forced)
    if forced is not None:
        raise UserError(f"'{path}' is not JSON, so it cannot be format '{forced.NAME}': check the file")
    for module in FILE_IMPORTERS:
        if module.detect(path):
            return module.NAME, _suggesting(module, module.load(path, str(path)))
    raise _unknown(path, f"suffix '{suffix}' is not one veriscale reads" if suffix else "")


def _load_records(path: Path, content: str, forced: ModuleType | None) -> tuple[str, list[Candidate]]:
    records = parse_records(content, path)
    first_line, first = records[0]
    module = forced or _record_importer(first, path, first_line)
    merge = getattr(module, "merge_records", None)
    if merge is not None:
        merged = merge([r for _, r in records])
        if len(merged) != len(records):
            records = [(first_line, r) for r in merged]
    single = len(records) == 1 and logical_suffix(path) not in JSONL_SUFFIXES
    candidates: list[Candidate] = []
    for line, record in records:
        if not module.detect(record):
            raise UserError(
                f"'{path}' line {line} is not a {module.NAME} record like line {first_line}: "
                "give one format per file"
            )
        candidates.extend(module.load(record, str(path) if single else f"{path}:{line}"))
    return module.NAME, _suggesting(module, candidates)


def _suggesting(module: ModuleType, candidates: list[Candidate]) -> list[Candidate]:
    """``candidates``, each with the criteria pack its format suggests (an importer's optional
    ``CRITERIA``) as ``metadata["criteria_pack"]``, for :func:`veriscale.selection.inputs.default_criteria`."""
    pack = getattr(module, "CRITERIA", None)
    if isinstance(pack, str):
        for candidate in candidates:
            candidate.metadata.setdefault("criteria_pack", pack)
    return candidates


def detect_format(path: str | Path) -> str:
    """The format name veriscale would read ``path`` as (it loads the file to be sure)."""
    name, _ = load_file(path)
    return name


def load_candidates(paths: Iterable[str | Path], format: str | None = None) -> list[Candidate]:
    """Load every path (files or rollout folders) as candidates; all must share one format."""
    paths = list(paths)
    if not paths:
        raise UserError("no candidate files given: pass at least one file or folder")
    candidates: list[Candidate] = []
    first_format = ""
    for path in paths:
        name, loaded = load_file(path, format)
        if not first_format:
            first_format = name
        elif name != first_format:
            raise UserError(
                f"'{path}' is {name} but '{paths[0]}' is {first_format}: give candidates of one "
                "format per call"
            )
        for candidate in loaded:
            _check_labels(candidate, path)
        candidates.extend(loaded)
    return candidates


def _not_finite(value: Any) -> bool:
    """Whether ``value`` is (or holds, in a list or table) a NaN or infinite number."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_not_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_not_finite(v) for v in value)
    return False


def _check_labels(candidate: Any, path: str | Path) -> None:
    """Refuse a label (reward, score...) that is NaN or infinite (``NaN``, ``Infinity``, ``1e999`` in JSON)."""
    for key, value in candidate.labels.items():
        if _not_finite(value):
            raise UserError(f"'{path}': candidate '{candidate.id}' has label {key} = {value!r}, not a finite number: "
                            "fix that value (or drop it) in the file")
