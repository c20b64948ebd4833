#!/usr/bin/env python3
"""Diff the same cells across several workbooks (e.g. one per rollout); print only differences.

    python3 xlsx_diff.py rollouts/*/deliverables/model.xlsx
    python3 xlsx_diff.py rollouts/*/deliverables/model.xlsx --sheet Summary --range B1:B10
    python3 xlsx_diff.py a.xlsx b.xlsx --tol 1e-6 --show-formulas

Each workbook is labelled by its rollout folder (rollouts/r03/deliverables/x.xlsx -> r03), its
parent folder, or its whole path when those repeat. A cell differs when its saved values differ (numbers beyond --tol) or, with
--show-formulas, when its formulas differ. Missing sheets are reported as such. Needs openpyxl.
"""

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_lib"))
from office_caps import problem  # noqa: E402 - veriscale's inflation caps, checked before any library opens a file


def label_for(path):
    """rollouts/r03/deliverables/x.xlsx -> r03; otherwise the parent folder's name."""
    parts = Path(path).parts
    if "deliverables" in parts:
        index = parts.index("deliverables")
        if index > 0:
            return parts[index - 1]
    return Path(path).parent.name or str(path)


def unique_labels(paths):
    labels = [label_for(p) for p in paths]
    return labels if len(set(labels)) == len(labels) else [str(p) for p in paths]


def read_cells(path, sheet_filter, cell_range):
    import openpyxl
    from openpyxl.utils.cell import range_boundaries

    formulas = openpyxl.load_workbook(path, data_only=False)
    values = openpyxl.load_workbook(path, data_only=True)
    cells = {}
    for name in formulas.sheetnames:
        if sheet_filter and name != sheet_filter:
            continue
        sheet = formulas[name]
        # Same cell walk as xlsx_dump.py on purpose: each skill script is a standalone program (run by path in the jail).
        if cell_range:
            min_col, min_row, max_col, max_row = range_boundaries(cell_range)
            rows = sheet.iter_rows(min_row=min_row, max_row=max_row, min_col=min_col, max_col=max_col)
        else:
            rows = sheet.iter_rows()
        for row in rows:
            for cell in row:
                raw = cell.value
                if raw is None:
                    continue
                formula = raw if isinstance(raw, str) and raw.startswith("=") else None
                value = values[name][cell.coordinate].value if formula else raw
                cells[f"{name}!{cell.coordinate}"] = (value, formula)
    return formulas.sheetnames, cells


def same(a, b, tol):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=tol, abs_tol=tol)
    return a == b


def main(argv=None):
    # A standalone program run by path in the jail: its own argument parsing, nothing shared.
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("books", nargs="+", help="two or more workbooks")
    parser.add_argument("--sheet", help="only this sheet")
    parser.add_argument("--range", dest="cell_range", help="only this range, e.g. B1:B10")
    parser.add_argument("--tol", type=float, default=1e-9, help="relative/absolute tolerance for numbers")
    parser.add_argument("--show-formulas", action="store_true", help="also report cells whose formulas differ")
    args = parser.parse_args(argv)
    if len(args.books) < 2:
        parser.error("give at least two workbooks")
    for path in args.books:
        refused = problem(path)
        if refused:
            print(f"error: {refused}", file=sys.stderr)
            return 2
    loaded = {}
    for label, path in zip(unique_labels(args.books), args.books):
        try:
            loaded[label] = read_cells(path, args.sheet, args.cell_range)
        except Exception as exc:
            print(f"error: cannot read {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
    labels = list(loaded)
    all_sheets = sorted({s for sheets, _ in loaded.values() for s in sheets})
    for sheet in all_sheets:
        missing = [label for label in labels if sheet not in loaded[label][0]]
        if missing and (not args.sheet or args.sheet == sheet):
            print(f"sheet {sheet}: missing in {', '.join(missing)}")
    refs = sorted({ref for _, cells in loaded.values() for ref in cells})
    differing = 0
    for ref in refs:
        entries = [loaded[label][1].get(ref, (None, None)) for label in labels]
        values_differ = any(not same(entries[0][0], e[0], args.tol) for e in entries[1:])
        formulas_differ = args.show_formulas and len({e[1] for e in entries}) > 1
        if not (values_differ or formulas_differ):
            continue
        differing += 1
        shown = []
        for label, (value, formula) in zip(labels, entries):
            text = "<empty>" if value is None and formula is None else repr(value)
            if formula and (args.show_formulas or value is None):
                text += f" ({formula})"
            shown.append(f"{label}={text}")
        print(f"{ref}\t" + "\t".join(shown))
    print(f"# {differing} differing cell(s) across {len(labels)} workbooks", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
