#!/usr/bin/env python3
"""Edit cells of a workbook into a new file, keeping every sheet, style and other formula.

    python3 xlsx_set_cells.py model.xlsx out/model.xlsx --set "Summary!B6==B1/500000-1"
    python3 xlsx_set_cells.py model.xlsx out/model.xlsx --set "Costs!D6==SUM(D2:D5)" --set "Notes!A1=checked"

Each --set is SHEET!CELL=VALUE; a VALUE that starts with "=" is a formula, a number is stored as
a number, anything else as text. The cell's number format and style are kept. The script
refuses to replace a formula by a constant (use --over-formula when the evidence says the cell
must be a constant) and refuses to write when saving would drop charts, images, pivot tables or
other parts the library cannot carry (use --allow-loss only if the task does not need them).
Afterwards run evidence-xlsx/scripts/xlsx_recalc.py OUT --write-cache OUT so the saved values
match the formulas. Needs openpyxl. Exit 0 on success, 2 on refusal or error.
"""

import argparse
import re
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_lib"))
from office_caps import problem  # noqa: E402 - veriscale's inflation caps, checked before any library opens a file

KEEP_PREFIXES = ("xl/charts/", "xl/drawings/", "xl/media/", "xl/pivotTables/", "xl/pivotCache/",
                 "xl/embeddings/", "xl/vbaProject.bin", "xl/externalLinks/", "xl/queryTables/")


def parse_set(text):
    match = re.fullmatch(r"(?:'([^']+)'|([^!]+))!([A-Za-z]{1,3}[0-9]+)=(.*)", text, flags=re.S)
    if not match:
        raise ValueError(f"--set {text!r} is not SHEET!CELL=VALUE")
    sheet = match.group(1) or match.group(2)
    raw = match.group(4)
    if raw.startswith("="):
        value = raw
    else:
        try:
            value = int(raw) if re.fullmatch(r"[-+]?\d+", raw) else float(raw)
        except ValueError:
            value = raw
    return sheet, match.group(3).upper(), value


def fragile_parts(path):
    with zipfile.ZipFile(path) as archive:
        return sorted(n for n in archive.namelist() if n.startswith(KEEP_PREFIXES))


def count_formulas(book):
    return sum(1 for sheet in book.worksheets for row in sheet.iter_rows() for cell in row
               if isinstance(cell.value, str) and cell.value.startswith("="))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("book", help="workbook to edit (left unchanged)")
    parser.add_argument("out", help="where to write the edited copy")
    parser.add_argument("--set", dest="edits", action="append", required=True, help="SHEET!CELL=VALUE (repeatable)")
    parser.add_argument("--over-formula", action="store_true", help="allow replacing a formula by a constant")
    parser.add_argument("--allow-loss", action="store_true", help="write even if charts/images/pivots would be dropped")
    args = parser.parse_args(argv)
    for path in [args.book]:
        refused = problem(path)
        if refused:
            print(f"error: {refused}", file=sys.stderr)
            return 2
    import openpyxl

    try:
        edits = [parse_set(text) for text in args.edits]
        book = openpyxl.load_workbook(args.book, keep_vba=args.book.lower().endswith(".xlsm"))
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sheets_before = list(book.sheetnames)
    formulas_before = count_formulas(book)
    expected_change = 0
    for sheet, ref, value in edits:
        if sheet not in book.sheetnames:
            print(f"error: no sheet {sheet!r}; sheets: {', '.join(book.sheetnames)}", file=sys.stderr)
            return 2
        cell = book[sheet][ref]
        was_formula = isinstance(cell.value, str) and cell.value.startswith("=")
        is_formula = isinstance(value, str) and value.startswith("=")
        if was_formula and not is_formula and not args.over_formula:
            print(f"error: {sheet}!{ref} holds {cell.value}; replacing it by a constant breaks the model "
                  "(pass --over-formula if the evidence requires it)", file=sys.stderr)
            return 2
        expected_change += int(is_formula) - int(was_formula)
        print(f"{sheet}!{ref}\t{cell.value!r} -> {value!r}")
        cell.value = value  # keeps the cell's style and number format
    lost = fragile_parts(args.book)
    if lost and not args.allow_loss:
        print("error: saving would drop " + ", ".join(lost) + " (pass --allow-loss if the task does not need them)",
              file=sys.stderr)
        return 2
    book.save(args.out)
    check = openpyxl.load_workbook(args.out)
    if check.sheetnames != sheets_before:
        print(f"error: sheets changed on save: {sheets_before} -> {check.sheetnames}", file=sys.stderr)
        return 2
    if count_formulas(check) != formulas_before + expected_change:
        print("error: formula count changed beyond the edits; inspect the output", file=sys.stderr)
        return 2
    print(f"# wrote {args.out}; now run xlsx_recalc.py {args.out} --write-cache {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
