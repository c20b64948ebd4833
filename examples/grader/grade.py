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
"""

import argparse
import json
import math
import os
import re
import sys
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


# --- workbooks ---------------------------------------------------------------------------------


def numeric_cells(path):
    """{(sheet, A1): number} using saved values, recomputing when formula results are missing."""
    import openpyxl

    values = openpyxl.load_workbook(path, data_only=True)
    formulas_book = openpyxl.load_workbook(path, data_only=False)
    cells, missing = {}, False
    for sheet in formulas_book.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                if cell.value is None:
                    continue
                is_formula = isinstance(cell.value, str) and cell.value.startswith("=")
                value = values[sheet.title][cell.coordinate].value if is_formula else cell.value
                if is_formula and value is None:
                    missing = True
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    cells[(sheet.title, cell.coordinate)] = float(value)
    if missing:
        cells.update(recomputed_cells(path, formulas_book.sheetnames))
    return cells


def recomputed_cells(path, sheetnames):
    import formulas

    by_upper = {name.upper(): name for name in sheetnames}
    solution = formulas.ExcelModel().loads(str(path)).finish().calculate()
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
    got = numeric_cells(books[0])
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
    texts.append(docx_text(doc) if doc.is_file() else "")
    passed = 0
    for text in texts:
        stated = facts(text)
        for label, values in wanted:
            if any(label == l and len(values) == len(v) and all(close(a, b) for a, b in zip(values, v))
                   for l, v in stated):
                passed += 1
    checks = 2 * len(wanted)
    return {"score": passed / checks, "kind": "report", "checks": checks, "passed": passed}


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
