#!/usr/bin/env python3
"""An example grader for `veriscale harness score`, for the three fixture task kinds.

    python3 examples/grader/grade.py --references tests/fixtures/harness \
        --task tasks/finance_workbook --deliverables some/deliverables
    -> {"score": 0.9166666666666666, "kind": "workbook", "checks": 60, "passed": 55}

veriscale appends `--task TASK_DIR --deliverables DIR` to the command you give it; the answer
keys live OUTSIDE the task folder, under `--references DIR/<task name>/` (here the fixtures'
source folders, which `materialize` left the keys in). The grader picks a method from the keys
it finds there:

- `golden.xlsx`: every numeric cell of the golden workbook is looked up in the delivered
  workbook (same sheet, same cell). A formula cell's saved value is used when the file has one;
  a workbook saved without values (e.g. edited with openpyxl) is recomputed with `formulas`.
  score = matching cells / numeric cells.
- `expected_summary.json`: each top-level key must equal the delivered `summary.json`'s value
  (numbers within 1e-6). score = equal keys / keys.
- `solution/report.md`: each "Label: value" line of the solution is a fact; a fact passes in a
  delivered report when a line with that label states the same numbers. Both `report.md` and
  `report.docx` are checked. score = passed / (2 x facts).

Contract: exactly one JSON line on stdout with "score" in [0, 1], exit 0; messages go to
stderr; a missing answer key is a grader error (exit 2), a missing deliverable scores 0.

The grader opens no file but the delivered ones and the answer keys. A delivered office file
that refers to another file is refused before any library opens it, and scores like a missing
one (0, with a "note" saying why): an external workbook link (`xl/externalLinks/`, an
`externalReference`), an external relationship other than a hyperlink, a formula or defined name
that names another workbook (`[1]Summary!B1`, `'../keys/[golden.xlsx]Summary'!B1`, also inside
a string, as `formulas` reads `INDIRECT("...")`), a DDE link, or a DTD. When formulas are
recomputed, `formulas` may open the delivered workbook only: any other file it asks for is
refused (the reference becomes #REF!). A workbook that must be recomputed is refused (0, with a
"note") when one of its formulas or defined names spans more than `MAX_RANGE_CELLS` cells
(`=SUM(A2:CV20000)`, `A:A`), or all of them more than `MAX_FORMULA_CELLS`: `formulas` builds
every cell of a range, and one such sum took 276 s and 3.4 GB.
"""

import argparse
import html
import json
import math
import os
import re
import sys
import zipfile
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")
TOL = 1e-6


def close(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=TOL, abs_tol=TOL)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return a == b


# --- office files that point outside themselves ------------------------------------------------

MAX_PART_BYTES = 64 << 20  # read at most this much of one part, and 4x of all parts together
MAX_PARTS = 10_000
RELATIONSHIP = re.compile(r"<(?:[\w.-]+:)?Relationship\b([^>]*)>")
ATTRIBUTE = re.compile(r"([\w.:-]+)\s*=\s*(\"[^\"]*\"|'[^']*')")
EXTERNAL_ELEMENT = re.compile(r"<(?:[\w.-]+:)?(externalReferences?|externalBook|externalLink)\b")
TAG = re.compile(r"<(/?)(?:[\w.-]+:)?([\w.-]+)[^>]*?(/?)>")
FORMULA_ELEMENTS = {"f", "definedName", "formula", "formula1", "formula2"}
QUOTED_EXTERNAL = re.compile(r"'(?:[^']|'')*[\[\]/\\:?*](?:[^']|'')*'\s*!")
BRACKET_EXTERNAL = re.compile(r"\[[^\[\]]*\][^\s!'\"(),;=+\-*/^&<>{}\[\]]*!")
STRING = re.compile(r'"(?:[^"]|"")*"')


def formula_reaches_out(formula):
    outside_strings = STRING.sub('""', formula)
    if "|" in outside_strings:
        return "is a DDE link"
    if QUOTED_EXTERNAL.search(formula) or BRACKET_EXTERNAL.search(formula):
        return "refers to another workbook"
    return None


def part_text(data):
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", "replace")
    return data.decode("utf-8", "replace")


def formulas_in(text):
    """The text of every formula element (cell formula, defined name, validation), in one pass."""
    start = None
    for tag in TAG.finditer(text):
        closing, local, empty = tag.groups()
        if local not in FORMULA_ELEMENTS or empty:
            continue
        if not closing and start is None:
            start = (local, tag.end())
        elif closing and start is not None and start[0] == local:
            yield html.unescape(text[start[1]:tag.start()])
            start = None


def outside_reference(path):
    """Why the office file at `path` would make a reader open another file, or None."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_PARTS:
                return f"it holds {len(members)} parts, more than this grader checks"
            total = 0
            for info in members:
                name = info.filename.replace("\\", "/")
                if name.lower().startswith("xl/externallinks/"):
                    return f"its part {name!r} links it to another workbook"
                if name.lower() == "xl/connections.xml":
                    return f"its part {name!r} holds data connections"
                if info.is_dir():
                    continue
                with archive.open(info) as member:
                    data = member.read(MAX_PART_BYTES + 1)
                total += len(data)
                if len(data) > MAX_PART_BYTES or total > 4 * MAX_PART_BYTES:
                    return f"its part {name!r} is too large to check"
                if re.search(rb"<!doctype", data, re.IGNORECASE) or re.search(rb"<\x00!\x00[dD]\x00[oO]\x00[cC]\x00", data):
                    return f"its part {name!r} declares a DTD"
                if not data.lstrip().startswith((b"<", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
                    continue
                text = part_text(data)
                found = EXTERNAL_ELEMENT.search(text)
                if found:
                    return f"its part {name!r} holds an {found.group(1)} element (a link to another workbook)"
                if name.lower().endswith(".rels"):
                    for match in RELATIONSHIP.finditer(text):
                        attrs = {k.rsplit(":", 1)[-1]: html.unescape(v[1:-1]) for k, v in ATTRIBUTE.findall(match.group(1))}
                        kind = attrs.get("Type", "").rstrip("/").rsplit("/", 1)[-1]
                        if attrs.get("TargetMode", "").strip().lower() == "external" and kind.lower() != "hyperlink":
                            return f"its part {name!r} has an external {kind} relationship to {attrs.get('Target', '')!r}"
                for formula in formulas_in(text):
                    why = formula_reaches_out(formula)
                    if why:
                        return f"a formula in {name!r} {why}: {formula[:120]!r}"
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError, ValueError, EOFError) as exc:
        return f"it cannot be checked ({exc})"
    return None


def refused(path, deliverables):
    """The refusal note for a delivered office file that points outside itself (also on stderr), or None."""
    why = outside_reference(path)
    if why is None:
        return None
    note = f"{path.relative_to(deliverables).as_posix()} refused: {why}"
    print(f"grade.py: {note}", file=sys.stderr)
    return note


# --- workbooks ---------------------------------------------------------------------------------


# --- ranges too large to recompute -------------------------------------------------------------

MAX_RANGE_CELLS = 100_000  # cells one range of a recomputed workbook may span
MAX_FORMULA_CELLS = 1_000_000  # cells all ranges of a recomputed workbook may span together
MAX_ROWS, MAX_COLUMNS = 1_048_576, 16_384  # an Excel sheet
_EDGE = r"(?<![\w.$])"
CELL_RANGE = re.compile(_EDGE + r"\$?([A-Za-z]{1,3})\$?(\d+)\s*:\s*\$?([A-Za-z]{1,3})\$?(\d+)(?![\w(])")
COLUMN_RANGE = re.compile(_EDGE + r"\$?([A-Za-z]{1,3})\s*:\s*\$?([A-Za-z]{1,3})(?![\w(!])")
ROW_RANGE = re.compile(_EDGE + r"\$?(\d+)\s*:\s*\$?(\d+)(?![\w.(])")


class TooLarge(Exception):
    """A workbook whose ranges are too large to recompute (the message says where)."""


def column_number(letters):
    number = 0
    for letter in letters.upper():
        number = number * 26 + ord(letter) - 64
    return number


def range_cells(formula):
    """[(range text, cells)] for every cell, column and row range in `formula` (outside strings)."""
    text = STRING.sub('""', formula)
    found = []
    for match in CELL_RANGE.finditer(text):
        c1, r1, c2, r2 = match.groups()
        cells = (abs(column_number(c2) - column_number(c1)) + 1) * (abs(int(r2) - int(r1)) + 1)
        found.append((match.group(0), cells))
    text = CELL_RANGE.sub("", text)
    for match in COLUMN_RANGE.finditer(text):
        found.append((match.group(0), (abs(column_number(match.group(2)) - column_number(match.group(1))) + 1) * MAX_ROWS))
    for match in ROW_RANGE.finditer(text):
        found.append((match.group(0), (abs(int(match.group(2)) - int(match.group(1))) + 1) * MAX_COLUMNS))
    return found


def check_ranges(formulas):
    """Raise `TooLarge` when a range of [(where, formula)] spans too many cells to recompute."""
    total = 0
    for where, formula in formulas:
        for shown, cells in range_cells(formula):
            if cells > MAX_RANGE_CELLS:
                raise TooLarge(f"its formula in {where} spans {cells:,} cells ({shown}), more than the "
                               f"{MAX_RANGE_CELLS:,} this grader recomputes in one range")
            total += cells
            if total > MAX_FORMULA_CELLS:
                raise TooLarge(f"its formulas span more than {MAX_FORMULA_CELLS:,} cells in all (up to {where}), "
                               "more than this grader recomputes")


def defined_name_formulas(book):
    """[(name, formula)] of the workbook's defined names (and sheet-scoped ones), whatever openpyxl's version."""
    found = []
    scopes = [book.defined_names] + [getattr(sheet, "defined_names", {}) for sheet in book.worksheets]
    for scope in scopes:
        items = scope.items() if hasattr(scope, "items") else [(d.name, d) for d in getattr(scope, "definedName", [])]
        for name, definition in items:
            value = getattr(definition, "attr_text", None) or getattr(definition, "value", None)
            if isinstance(value, str):
                found.append((f"the defined name {name!r}", value))
    return found


def numeric_cells(path):
    """{(sheet, A1): number} using saved values, recomputing when formula results are missing."""
    import openpyxl

    values = openpyxl.load_workbook(path, data_only=True)
    formulas_book = openpyxl.load_workbook(path, data_only=False)
    cells, missing, formulas = {}, False, []
    for sheet in formulas_book.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                if cell.value is None:
                    continue
                is_formula = isinstance(cell.value, str) and cell.value.startswith("=")
                value = values[sheet.title][cell.coordinate].value if is_formula else cell.value
                if is_formula:
                    formulas.append((f"{sheet.title}!{cell.coordinate}", cell.value))
                if is_formula and value is None:
                    missing = True
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    cells[(sheet.title, cell.coordinate)] = float(value)
    if missing:
        check_ranges(formulas + defined_name_formulas(formulas_book))  # before `formulas` builds every cell
        cells.update(recomputed_cells(path, formulas_book.sheetnames))
    return cells


def only_this_workbook(path):
    """Make `formulas` open `path` and nothing else (any other workbook it asks for is refused)."""
    from formulas.excel import xlreader

    opened = xlreader.load_workbook
    allowed = os.path.realpath(path)

    def load_workbook(filename, *args, **kwargs):
        if os.path.realpath(filename) != allowed:
            raise PermissionError(f"the grader opens no workbook but the delivered one, not {filename!r}")
        return opened(filename, *args, **kwargs)

    xlreader.load_workbook = load_workbook
    return lambda: setattr(xlreader, "load_workbook", opened)


def recomputed_cells(path, sheetnames):
    import formulas

    by_upper = {name.upper(): name for name in sheetnames}
    restore = only_this_workbook(path)
    try:
        solution = formulas.ExcelModel().loads(str(path)).finish().calculate()
    finally:
        restore()
    cells = {}
    for key, ranges in solution.items():
        match = re.fullmatch(r"'?\[[^\]]+\](.+?)'?!([A-Z]+[0-9]+)", key)
        if not match or match.group(1) not in by_upper:
            continue
        value = ranges.value[0, 0]
        if hasattr(value, "item"):
            value = value.item()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            cells[(by_upper[match.group(1)], match.group(2))] = float(value)
    return cells


def grade_workbook(golden, deliverables):
    expected = numeric_cells(golden)
    books = sorted(deliverables.rglob("*.xlsx"))
    if not books:
        return {"score": 0.0, "kind": "workbook", "checks": len(expected), "passed": 0, "note": "no .xlsx delivered"}
    note = refused(books[0], deliverables)
    if note:
        return {"score": 0.0, "kind": "workbook", "checks": len(expected), "passed": 0, "note": note}
    try:
        got = numeric_cells(books[0])
    except TooLarge as exc:
        note = f"{books[0].relative_to(deliverables).as_posix()} refused: {exc}"
        print(f"grade.py: {note}", file=sys.stderr)
        return {"score": 0.0, "kind": "workbook", "checks": len(expected), "passed": 0, "note": note}
    passed = sum(1 for ref, value in expected.items() if ref in got and close(value, got[ref]))
    return {"score": passed / len(expected), "kind": "workbook", "checks": len(expected), "passed": passed}


# --- summary JSON ------------------------------------------------------------------------------


def grade_summary(expected_path, deliverables):
    expected = json.loads(expected_path.read_text(encoding="utf-8"))
    found = sorted(deliverables.rglob("summary.json"))
    if not found:
        return {"score": 0.0, "kind": "summary", "checks": len(expected), "passed": 0, "note": "no summary.json delivered"}
    try:
        got = json.loads(found[0].read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {"score": 0.0, "kind": "summary", "checks": len(expected), "passed": 0, "note": "summary.json is not JSON"}
    if not isinstance(got, dict):
        got = {}
    passed = sum(1 for key, value in expected.items() if key in got and close(value, got[key]))
    return {"score": passed / len(expected), "kind": "summary", "checks": len(expected), "passed": passed}


# --- reports -----------------------------------------------------------------------------------

NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def numbers(text):
    return sorted(float(n.replace(",", "")) for n in NUMBER.findall(text))


def facts(text):
    """[(label lower-case, numbers)] for every "Label: value" line."""
    found = []
    for line in text.splitlines():
        if ":" in line and not line.lstrip().startswith(("#", "|")):
            label, value = line.split(":", 1)
            if NUMBER.search(value):
                found.append((label.strip().lower(), numbers(value)))
    return found


def docx_text(path):
    import docx

    return "\n".join(p.text for p in docx.Document(str(path)).paragraphs)


def grade_report(solution, deliverables):
    wanted = facts(solution.read_text(encoding="utf-8"))
    texts = []
    md = deliverables / "report.md"
    texts.append(md.read_text(encoding="utf-8") if md.is_file() else "")
    doc = deliverables / "report.docx"
    note = refused(doc, deliverables) if doc.is_file() else None
    texts.append(docx_text(doc) if doc.is_file() and note is None else "")
    passed = 0
    for text in texts:
        stated = facts(text)
        for label, values in wanted:
            if any(label == l and len(values) == len(v) and all(close(a, b) for a, b in zip(values, v))
                   for l, v in stated):
                passed += 1
    checks = 2 * len(wanted)
    result = {"score": passed / checks, "kind": "report", "checks": checks, "passed": passed}
    if note:
        result["note"] = note
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--references", required=True, type=Path, help="folder holding <task name>/ answer keys")
    parser.add_argument("--task", required=True, type=Path, help="the materialised task folder (from veriscale)")
    parser.add_argument("--deliverables", required=True, type=Path, help="the files to grade (from veriscale)")
    args = parser.parse_args(argv)
    keys = args.references / args.task.name
    if (keys / "golden.xlsx").is_file():
        result = grade_workbook(keys / "golden.xlsx", args.deliverables)
    elif (keys / "expected_summary.json").is_file():
        result = grade_summary(keys / "expected_summary.json", args.deliverables)
    elif (keys / "solution" / "report.md").is_file():
        result = grade_report(keys / "solution" / "report.md", args.deliverables)
    else:
        print(f"error: no answer key for task {args.task.name!r} under {args.references}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
