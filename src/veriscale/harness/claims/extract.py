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

    claims, warnings = extract_worker.extract_claims({"r01": {"model.xlsx": Path(...)}})  # these readers, capped

Bounds (issue 30): every file is read in a child process (:mod:`.extract_worker`) under the text
view's caps: ``view_timeout_s`` seconds per file (and :data:`ROLLOUT_TIMEOUT_FILES` times that
for all of one rollout's files) and ``view_memory_mb`` of address space. A rollout yields at
most :data:`MAX_FILE_CLAIMS` claims from one file, :data:`MAX_ROLLOUT_CLAIMS` in all and
:data:`MAX_ROLLOUT_CLAIM_BYTES` of claim text; a file that hits a budget or a cap keeps what was
read before it and adds one warning naming the file and the cap. An office file is checked by
:func:`veriscale.harness.workspace.office_content.office_refusal` before a library opens it, so a
DTD (an entity expansion) or a link to another file is refused unread.
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

from veriscale.harness.workspace.office_content import check_office_file
from veriscale.harness.workspace.text_views import docx_lines, pdf_lines, xlsx_cells, xlsx_sheetnames
from veriscale.harness.workspace.zip_limits import ArchiveRefused, ZipLimits

Value = Union[float, str, bool, None]

#: claims taken from one file of one rollout; the file's rest is not read
MAX_FILE_CLAIMS = 20_000
#: claims taken from all files of one rollout
MAX_ROLLOUT_CLAIMS = 100_000
#: bytes of claim text (each claim's JSON: key, locator, group, value, formula) from one rollout
MAX_ROLLOUT_CLAIM_BYTES = 16 << 20
#: one rollout's files may take this many per-file time caps (``view_timeout_s``) in all
ROLLOUT_TIMEOUT_FILES = 10

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


def _text_lines(path: Path, limits: ZipLimits | None = None) -> Iterator[str]:
    suffix = path.suffix.lower()
    if suffix == ".docx":
        return docx_lines(path, limits)
    if suffix == ".pdf":
        return pdf_lines(path, limits)
    return iter(path.read_text(encoding="utf-8", errors="replace").splitlines())


# --- per format ----------------------------------------------------------------------------


def _xlsx_claims(rel: str, path: Path, limits: ZipLimits | None = None) -> Iterator[Claim]:
    for sheet in xlsx_sheetnames(path, limits):  # first: a budget spent on cells still leaves the sheets
        locator = f"{sheet} (sheet)"
        yield Claim(f"{rel}:{locator}", "sheet", rel, locator, f"{rel}:{sheet}", "present")
    for sheet, ref, value, formula in xlsx_cells(path, limits):
        shown = normalise_value(value)
        if formula and value is None:
            shown = formula  # no cached value saved: compare the formula text instead
        locator = f"{sheet}!{ref}"
        yield Claim(f"{rel}:{locator}", "xlsx_cell", rel, locator, f"{rel}:{sheet}", shown, formula)


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    rows = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    if not rows:
        return [], []
    return [h.strip() for h in rows[0]], rows[1:]


CsvProfile = tuple[list[str], set[str]]


def csv_profile(header: list[str], rows: list[list[str]], max_columns: int | None = None) -> CsvProfile:
    """(header, the columns whose values are all non-empty and distinct) of one csv version.

    A repeated column name counts at its first position; with ``max_columns`` only the first
    that many columns are candidates (and the header is cut there). Linear in the cells: every
    column is looked at once (a 2 MiB csv of 220,000 columns took over 600 s when each column
    name was looked up in the header list, issue 30).
    """
    if max_columns is not None:
        header = header[:max_columns]
    first: dict[str, int] = {}
    for index, name in enumerate(header):
        first.setdefault(name, index)
    unique: set[str] = set()
    if not rows:
        return header, unique
    for name, index in first.items():
        if not name:
            continue
        seen: set[str] = set()
        for row in rows:
            value = row[index].strip() if index < len(row) else ""
            if not value or value in seen:
                break
            seen.add(value)
        else:
            unique.add(name)
    return header, unique


def key_column_of(profiles: list[CsvProfile]) -> str | None:
    """The key column chosen from every version's :func:`csv_profile` (see :func:`choose_key_column`)."""
    if not profiles:
        return None
    others = [set(header) for header, _unique in profiles[1:]]
    common = [h for h in dict.fromkeys(profiles[0][0]) if h and all(h in header for header in others)]
    best: tuple[int, int, int] | None = None
    chosen = None
    for position, column in enumerate(common):
        unique_in = sum(1 for _header, unique in profiles if column in unique)
        hint = int(any(h == column.lower() or column.lower().endswith("_" + h) for h in KEY_NAME_HINTS))
        score = (unique_in, hint, -position)
        if unique_in and (best is None or score > best):
            best, chosen = score, column
    return chosen


def choose_key_column(versions: list[tuple[list[str], list[list[str]]]]) -> str | None:
    """The column to key csv rows by, chosen jointly over every rollout's version of a file.

    Candidates are columns every version has; the best is unique (and non-empty) in the most
    versions, then has an id-like name, then sits furthest left. ``None`` when no column is
    unique in any version. Linear in the cells of all versions.
    """
    return key_column_of([csv_profile(header, rows) for header, rows in versions])


def csv_claims(rel: str, header: list[str], rows: list[list[str]], key_column: str | None) -> Iterator[Claim]:
    yield Claim(f"{rel}:row_count", "csv_rows", rel, "row_count", rel, float(len(rows)))
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
            if index >= len(row):
                break
            if index == key_index or not row[index].strip():
                continue
            locator = f"[{row_id}].{column or f'col{index + 1}'}"
            yield Claim(f"{rel}:{locator}", "csv_cell", rel, locator, f"{rel}:[{row_id}]",
                        _parse_csv_number(row[index]))


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


def _json_claims(rel: str, path: Path) -> Iterator[Claim]:
    data = json.loads(path.read_text(encoding="utf-8"))
    for leaf, parent, value in flatten_json(data):
        yield Claim(f"{rel}:{leaf}", "json_field", rel, leaf, f"{rel}:{parent}", value)


def _text_claims(rel: str, path: Path, limits: ZipLimits | None = None) -> Iterator[Claim]:
    seen: Counter[str] = Counter()
    for label, value in text_number_claims(_text_lines(path, limits)):
        seen[label] += 1
        locator = label + (f"#{seen[label]}" if seen[label] > 1 else "")
        yield Claim(f"{rel}:{locator}", "text_number", rel, locator, rel, value)


OFFICE_SUFFIXES = frozenset({".xlsx", ".xlsm", ".docx"})


def file_claims(rel: str, path: Path, limits: ZipLimits | None = None) -> Iterator[Claim]:
    """The claims of one non-csv file, lazily (csv: :func:`read_csv` and :func:`csv_claims`).

    An office file is checked first (:func:`office_refusal`): one that declares a DTD or links to
    another file raises ``ArchiveRefused`` before any library opens it.
    """
    suffix = path.suffix.lower()
    if suffix in OFFICE_SUFFIXES:
        refusal = check_office_file(path.parent, path.name, rel, limits or ZipLimits.from_env())
        if refusal is not None:
            raise ArchiveRefused(rel, refusal.found)
    if suffix in (".xlsx", ".xlsm"):
        yield from _xlsx_claims(rel, path, limits)
    elif suffix == ".json":
        yield from _json_claims(rel, path)
    elif suffix in TEXT_SUFFIXES or suffix in (".docx", ".pdf"):
        yield from _text_claims(rel, path, limits)
