#!/usr/bin/env python3
"""Print every non-empty cell of a workbook: Sheet!A1 <TAB> cached value <TAB> =formula.

    python3 xlsx_dump.py model.xlsx
    python3 xlsx_dump.py model.xlsx --sheet Summary --range A1:C20
    python3 xlsx_dump.py model.xlsx --formulas-only

The value column is what the file saved (Excel's cached result for a formula cell); an empty
value beside a formula means the file holds no cached result (e.g. it was saved by openpyxl).
Needs openpyxl.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_lib"))
from office_caps import problem  # noqa: E402 - veriscale's inflation caps, checked before any library opens a file


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("book", help="the .xlsx/.xlsm file")
    parser.add_argument("--sheet", help="only this sheet")
    parser.add_argument("--range", dest="cell_range", help="only cells in this range, e.g. A1:D20 (needs --sheet)")
    parser.add_argument("--formulas-only", action="store_true", help="only cells that hold a formula")
    args = parser.parse_args(argv)
    if args.cell_range and not args.sheet:
        parser.error("--range needs --sheet")
    return args


def main(argv=None):
    args = parse_args(argv)
    for path in [args.book]:
        refused = problem(path)
        if refused:
            print(f"error: {refused}", file=sys.stderr)
            return 2
    import openpyxl
    from openpyxl.utils.cell import range_boundaries

    try:
        formulas = openpyxl.load_workbook(args.book, data_only=False)
        values = openpyxl.load_workbook(args.book, data_only=True)
    except Exception as exc:  # any reader failure: say which file and why
        print(f"error: cannot read {args.book}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    names = formulas.sheetnames
    if args.sheet:
        if args.sheet not in names:
            print(f"error: no sheet {args.sheet!r}; sheets: {', '.join(names)}", file=sys.stderr)
            return 2
        names = [args.sheet]
    for name in names:
        sheet, cached = formulas[name], values[name]
        # Same cell walk as xlsx_diff.py on purpose: each skill script is a standalone program (run by path in the jail).
        if args.cell_range:
            min_col, min_row, max_col, max_row = range_boundaries(args.cell_range)
            rows = sheet.iter_rows(min_row=min_row, max_row=max_row, min_col=min_col, max_col=max_col)
        else:
            rows = sheet.iter_rows()
        for row in rows:
            for cell in row:
                raw = cell.value
                if raw is None:
                    continue
                formula = raw if isinstance(raw, str) and raw.startswith("=") else ""
                if args.formulas_only and not formula:
                    continue
                value = cached[cell.coordinate].value if formula else raw
                shown = "" if value is None else str(value).replace("\n", " ").replace("\t", " ")
                print(f"{name}!{cell.coordinate}\t{shown}\t{formula}".rstrip("\t"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
