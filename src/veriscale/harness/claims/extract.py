"""Pull comparable claims out of each rollout's deliverables (deterministic, no model).

A claim is one checkable statement with a key that lines up across rollouts::

    model.xlsx:Summary!B4          xlsx cell (cached value; its formula kept as evidence)
    model.xlsx:Margin (sheet)      a sheet exists
    clean.csv:[customer_id=C003].signup_date    csv cell keyed by the detected key column
    clean.csv:row_count            number of data rows
    summary.json:$.totals.spend    flattened json field
    report.md:total revenue        a number in text, keyed by the words before it
    report.md:revenue growth (%)   ... a percentage gets " (%)" in its key
    report.md:(file)               the file exists

Every claim also names a ``group`` (xlsx sheet, csv row, json parent object, text file):
claims in one group tend to stand or fall together, which the agenda uses as a weight.

Text numbers: the label is the words since the previous number on the same line, with
stop words trimmed from both ends ("The operating margin was 18%" -> "operating margin").
Years (1900-2100) and dates count as words, not claims; list markers ("1.") are ignored;
an unlabelled number after a labelled one on the same line (a table row) gets the earlier
label plus its position: "Revenue | 3.5 | 4.2" -> "revenue", "revenue [2]";
scale words multiply ("$4.2 million" == "4,200,000"). A number with no label is skipped.
A repeated key in one file gets "#2", "#3" in order.

    claims, warnings = extract_claims({"r01": {"model.xlsx": Path(...)}, "r02": {...}})
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Union

from veriscale.harness.workspace.views import docx_lines, pdf_lines, xlsx_cells, xlsx_sheetnames
from veriscale.harness.workspace.zip_limits import ArchiveRefused

Value = Union[float, str, bool, None]

TEXT_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".rst"})
KEY_NAME_HINTS = ("id", "key", "code", "sku", "name")
STOP_WORDS = frozenset(
    "a an the of to in on at by for from and or was were is are be been our its their this that "
    "with as approx approximately about around roughly".split()
)
_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "mn": 1e6, "billion": 1e9, "bn": 1e9, "b": 1e9}
_TOKEN = re.compile(
    r"(?P<date>\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b)"
    r"|(?P<number>(?<![\w.])[-\u2212]?[$\u20ac\u00a3]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
    r"(?:\s?(?:%|percent\b|thousand\b|million\b|billion\b|mn\b|bn\b|[kKmMbB]\b))?)"
    r"|(?P<word>[A-Za-z][\w'&/-]*)"
)
_LIST_MARKER = re.compile(r"^\s*(?:#+\s*)?(?:\d+[.)]|[-*+])\s+")


@dataclass(frozen=True)
class Claim:
    """One claim of one rollout."""

    key: str
    kind: str  # xlsx_cell | sheet | csv_cell | csv_rows | json_field | text_number | file
    file: str
    locator: str
    group: str
    value: Value
    formula: str | None = None


def normalise_value(value: object) -> Value:
    """Canonical form used for comparison: numbers as float, text stripped."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    return str(value).strip()


def _parse_csv_number(text: str) -> Value:
    raw = text.strip()
    candidate = raw.replace(",", "").lstrip("$\u20ac\u00a3")
    if re.fullmatch(r"[-+]?\d+(\.\d+)?", candidate):
        return float(candidate)
    return raw


# --- text ----------------------------------------------------------------------------------


def _label(words: list[str]) -> str:
    cleaned = [w.lower().strip("'-/&") for w in words]
    cleaned = [w for w in cleaned if w]
    while cleaned and cleaned[0] in STOP_WORDS:
        cleaned.pop(0)
    while cleaned and cleaned[-1] in STOP_WORDS:
        cleaned.pop()
    return " ".join(cleaned[-6:])


def _number_value(token: str) -> tuple[float, bool]:
    text = token.replace("\u2212", "-").replace(",", "")
    match = re.match(r"(-?)[$\u20ac\u00a3]?(\d+(?:\.\d+)?)\s?(.*)$", text)
    assert match is not None
    sign, digits, unit = match.groups()
    value = float(digits) * (-1 if sign else 1)
    unit = unit.lower()
    if unit in ("%", "percent"):
        return value, True
    return value * _SCALES.get(unit, 1.0), False


def text_number_claims(lines: Iterable[str]) -> Iterator[tuple[str, float]]:
    """Yield (label key, value) for every labelled number in ``lines``."""
    for line in lines:
        words: list[str] = []
        previous = ""
        position = 0
        for match in _TOKEN.finditer(_LIST_MARKER.sub("", line)):
            token = match.group(0)
            if match.lastgroup == "number":
                is_year = re.fullmatch(r"(19|20)\d\d", token) is not None
                if is_year:
                    words.append(token)
                    continue
                label = _label(words)
                words = []
                position += 1
                if label:
                    previous, position = label, 1
                elif previous:  # a table row: "Revenue | 3.5 | 4.2" -> "revenue", "revenue [2]"
                    label = f"{previous} [{position}]"
                else:
                    continue
                value, is_percent = _number_value(token)
                yield (f"{label} (%)" if is_percent else label), value
            else:
                words.append(token)


def _text_lines(path: Path) -> list[str]:
    suffix = path.suffix.lower()
    if suffix == ".docx":
        return list(docx_lines(path))
    if suffix == ".pdf":
        return list(pdf_lines(path))
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


# --- per format ----------------------------------------------------------------------------


def _xlsx_claims(rel: str, path: Path) -> list[Claim]:
    claims: list[Claim] = []
    sheets_seen: list[str] = []
    for sheet, ref, value, formula in xlsx_cells(path):
        if sheet not in sheets_seen:
            sheets_seen.append(sheet)
        shown = normalise_value(value)
        if formula and value is None:
            shown = formula  # no cached value saved: compare the formula text instead
        locator = f"{sheet}!{ref}"
        claims.append(Claim(f"{rel}:{locator}", "xlsx_cell", rel, locator, f"{rel}:{sheet}", shown, formula))
    for sheet in xlsx_sheetnames(path):
        locator = f"{sheet} (sheet)"
        claims.append(Claim(f"{rel}:{locator}", "sheet", rel, locator, f"{rel}:{sheet}", "present"))
    return claims


def _read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    rows = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    if not rows:
        return [], []
    return [h.strip() for h in rows[0]], rows[1:]


def choose_key_column(versions: list[tuple[list[str], list[list[str]]]]) -> str | None:
    """The column to key csv rows by, chosen jointly over every rollout's version of a file.

    Candidates are columns every version has; the best is unique (and non-empty) in the most
    versions, then has an id-like name, then sits furthest left. ``None`` when no column is
    unique in any version.
    """
    if not versions:
        return None
    common = [h for h in versions[0][0] if h and all(h in header for header, _ in versions[1:])]
    best: tuple[int, int, int] | None = None
    chosen = None
    for position, column in enumerate(common):
        unique_in = 0
        for header, rows in versions:
            index = header.index(column)
            values = [row[index].strip() if index < len(row) else "" for row in rows]
            if values and all(values) and len(set(values)) == len(values):
                unique_in += 1
        hint = int(any(h == column.lower() or column.lower().endswith("_" + h) for h in KEY_NAME_HINTS))
        score = (unique_in, hint, -position)
        if unique_in and (best is None or score > best):
            best, chosen = score, column
    return chosen


def _csv_claims(rel: str, header: list[str], rows: list[list[str]], key_column: str | None) -> list[Claim]:
    claims = [Claim(f"{rel}:row_count", "csv_rows", rel, "row_count", rel, float(len(rows)))]
    key_index = header.index(key_column) if key_column in header else None
    seen: Counter[str] = Counter()
    for number, row in enumerate(rows, start=1):
        if key_index is not None:
            key_value = row[key_index].strip() if key_index < len(row) else ""
            seen[key_value] += 1
            row_id = f"{key_column}={key_value}" + (f"#{seen[key_value]}" if seen[key_value] > 1 else "")
        else:
            row_id = f"row {number}"
        for index, column in enumerate(header):
            if index == key_index or index >= len(row) or not row[index].strip():
                continue
            locator = f"[{row_id}].{column or f'col{index + 1}'}"
            claims.append(Claim(f"{rel}:{locator}", "csv_cell", rel, locator, f"{rel}:[{row_id}]",
                                _parse_csv_number(row[index])))
    return claims


def _json_path(parent: str, key: str) -> str:
    return f"{parent}.{key}" if re.fullmatch(r"[A-Za-z_]\w*", key) else f"{parent}[{json.dumps(key)}]"


def flatten_json(data: object, path: str = "$") -> Iterator[tuple[str, str, Value]]:
    """Yield (path, parent path, value) for every leaf of ``data``."""
    if isinstance(data, dict) and data:
        for key, value in data.items():
            child = _json_path(path, str(key))
            if isinstance(value, (dict, list)) and value:
                yield from flatten_json(value, child)
            else:
                yield child, path, normalise_value(value if not isinstance(value, (dict, list)) else json.dumps(value))
    elif isinstance(data, list) and data:
        for index, value in enumerate(data):
            child = f"{path}[{index}]"
            if isinstance(value, (dict, list)) and value:
                yield from flatten_json(value, child)
            else:
                yield child, path, normalise_value(value if not isinstance(value, (dict, list)) else json.dumps(value))
    else:
        yield path, path, normalise_value(data if not isinstance(data, (dict, list)) else json.dumps(data))


def _json_claims(rel: str, path: Path) -> list[Claim]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [
        Claim(f"{rel}:{leaf}", "json_field", rel, leaf, f"{rel}:{parent}", value)
        for leaf, parent, value in flatten_json(data)
    ]


def _text_claims(rel: str, path: Path) -> list[Claim]:
    claims: list[Claim] = []
    seen: Counter[str] = Counter()
    for label, value in text_number_claims(_text_lines(path)):
        seen[label] += 1
        locator = label + (f"#{seen[label]}" if seen[label] > 1 else "")
        claims.append(Claim(f"{rel}:{locator}", "text_number", rel, locator, rel, value))
    return claims


def extract_claims(
    files_by_rollout: dict[str, dict[str, Path]],
) -> tuple[dict[str, list[Claim]], list[str]]:
    """Claims of every rollout, from ``{label: {relative path: file}}``; plus warnings.

    A file that cannot be parsed still yields its ``(file)`` claim and a warning.
    """
    warnings: list[str] = []
    csv_versions: dict[str, dict[str, tuple[list[str], list[list[str]]]]] = {}
    claims: dict[str, list[Claim]] = {label: [] for label in files_by_rollout}
    for label, files in sorted(files_by_rollout.items()):
        for rel, path in sorted(files.items()):
            claims[label].append(Claim(f"{rel}:(file)", "file", rel, "(file)", rel, "present"))
            suffix = path.suffix.lower()
            try:
                if suffix in (".xlsx", ".xlsm"):
                    claims[label].extend(_xlsx_claims(rel, path))
                elif suffix == ".csv":
                    csv_versions.setdefault(rel, {})[label] = _read_csv(path)
                elif suffix == ".json":
                    claims[label].extend(_json_claims(rel, path))
                elif suffix in TEXT_SUFFIXES or suffix in (".docx", ".pdf"):
                    claims[label].extend(_text_claims(rel, path))
            except ArchiveRefused as exc:  # over an inflation cap: never opened
                warnings.append(f"{label}/{rel} was not opened ({exc.reason}); only its presence is compared")
            except Exception as exc:  # noqa: BLE001 - a broken deliverable is a finding, not a crash
                warnings.append(f"{label}/{rel} could not be read ({type(exc).__name__}: {exc}); only its presence is compared")
    for rel, versions in sorted(csv_versions.items()):
        key_column = choose_key_column(list(versions.values()))
        for label, (header, rows) in versions.items():
            claims[label].extend(_csv_claims(rel, header, rows, key_column))
    return claims, warnings
