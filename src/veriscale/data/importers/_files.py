"""Read a candidate file once: text (gzip-aware) and, when it is JSON or JSONL, its records.

    text = read_text(Path("runs.jsonl.gz"))
    records = parse_records(text, Path("runs.jsonl.gz"))   # [(line_number, obj), ...]

Errors name the file (and the line, for JSONL) so the user can fix the input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from veriscale.data import reader, regular
from veriscale.data.reader import JsonLimit, decode_json, try_json
from veriscale.errors import UserError

JSONL_SUFFIXES = {".jsonl", ".ndjson"}
JSON_SUFFIXES = {".json", ".traj"}
TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text", ".rst"}
DIFF_SUFFIXES = {".diff", ".patch"}
MAX_BYTES = 1 << 30  # one candidate file, after gunzip


def logical_suffix(path: Path) -> str:
    """The suffix that names the format, ignoring a trailing ``.gz`` (``a.jsonl.gz`` -> ``.jsonl``)."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def check_regular(path: Path) -> None:
    """Refuse, in one sentence, a path that is missing, a folder, or not a regular file (a FIFO or
    a device would block or never end), and a file over ``MAX_BYTES``."""
    if path.is_dir():
        raise UserError(f"'{path}' is a folder: pass it as a folder of rollouts")
    regular.check_regular(path, "candidate file", MAX_BYTES)


def read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when the name ends in ``.gz`` (the limits of :mod:`veriscale.data.reader`:
    a regular file, at most ``$VERISCALE_MAX_INPUT_MB`` before and after gunzip)."""
    if path.is_dir():
        raise UserError(f"'{path}' is a folder: pass it as a folder of rollouts")
    return reader.read_bytes(path, "candidate file", gunzip=path.suffix.lower() == ".gz")


def read_text(path: Path) -> str:
    """The file as UTF-8 text; an empty or binary file is a ``UserError``."""
    raw = read_bytes(path)
    if not raw.strip():
        raise UserError(f"candidate file '{path}' is empty: give it the run's content or remove it")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if reader.binary_kind(raw) is not None:  # a PNG, a workbook, ...: say what it is and what to give
            raise reader.not_text(raw, f"'{path}'", exc.start) from None
        raise UserError(
            f"'{path}' is not UTF-8 text (an invalid byte at position {exc.start:,}): "
            "give a JSON, JSONL, diff or text file"
        ) from None


def looks_like_json(text: str) -> bool:
    """True when the first non-blank character opens a JSON object or array."""
    stripped = text.lstrip()
    return stripped[:1] in ("{", "[")


def parse_records(text: str, path: Path) -> list[tuple[int, Any]]:
    """Parse ``text`` as one JSON document or as JSONL; return ``(line_number, object)`` pairs.

    A single JSON document is reported as line 1. JSONL blank lines are skipped; a line that
    is not JSON (or is past the caps of ``_json``: depth, digits, lone surrogates) raises a
    ``UserError`` naming the file and the line number.
    """
    if logical_suffix(path) not in JSONL_SUFFIXES:
        try:
            return [(1, decode_json(text))]
        except JsonLimit as exc:
            raise UserError(f"'{path}' {exc}: fix the export or drop that value") from None
        except json.JSONDecodeError as whole_error:
            first_line = next((ln for ln in text.splitlines() if ln.strip()), "")
            if try_json(first_line) is None:
                raise UserError(
                    f"'{path}' is not valid JSON ({whole_error.msg} at line {whole_error.lineno}"
                    f" column {whole_error.colno}): fix the file or give its real format"
                ) from None
            # The first line is a whole JSON value: read the file as JSONL.
    records: list[tuple[int, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((number, decode_json(line)))
        except json.JSONDecodeError as exc:
            raise UserError(
                f"'{path}' line {number} is not valid JSON ({exc.msg}): fix or remove that line"
            ) from None
        except JsonLimit as exc:
            raise UserError(f"'{path}' line {number} {exc}: fix or remove that line") from None
    if not records:
        raise UserError(f"candidate file '{path}' is empty: give it the run's content or remove it")
    return records
