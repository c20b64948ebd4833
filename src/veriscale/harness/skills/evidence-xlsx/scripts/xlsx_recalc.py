#!/usr/bin/env python3
"""Recompute every formula of a workbook and report cells whose saved value disagrees.

    python3 xlsx_recalc.py model.xlsx                 # mismatches, one per line
    python3 xlsx_recalc.py model.xlsx --json          # all formula cells as JSON
    python3 xlsx_recalc.py model.xlsx --write-cache fixed.xlsx

A saved (cached) value that differs from the recomputed one means the file was not recalculated
after an input changed, or someone typed a number over what the formula shows elsewhere.
A formula cell with no saved value (files written by openpyxl) is listed as "no cached value".
--write-cache copies the workbook and stores the recomputed values as the cached results, so
readers that do not recalculate (graders, pandas, openpyxl data_only) see correct numbers;
everything else in the file is kept byte for byte. Needs openpyxl and formulas.
Exit status: 0 when every cached value matches, 1 when some do not, 2 on errors.
"""

import argparse
import json
import math
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path, PurePosixPath
from xml.sax.saxutils import escape

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_lib"))
from office_caps import problem  # noqa: E402 - veriscale's inflation caps, checked before any library opens a file

os.environ.setdefault("TQDM_DISABLE", "1")


def recompute(path):
    """{(SHEET upper, A1): recomputed value} for every cell the formulas engine evaluated."""
    import formulas

    model = formulas.ExcelModel().loads(path).finish()
    solution = model.calculate()
    results = {}
    for key, ranges in solution.items():
        match = re.fullmatch(r"'?\[[^\]]+\](.+?)'?!([A-Z]+[0-9]+)", key)
        if not match:
            continue  # ranges such as B2:B5 are inputs of other cells, not cells
        value = ranges.value[0, 0] if hasattr(ranges, "value") else ranges
        results[(match.group(1).upper(), match.group(2))] = plain(value)
    return results


def plain(value):
    """Turn engine values (numpy numbers, Excel errors, empty tokens) into JSON-able Python."""
    if value is None:
        return None
    name = type(value).__name__
    if name == "XlError":
        return str(value)
    if name == "Token" or str(value) == "empty":
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def agree(cached, recomputed, tol):
    if cached is None and recomputed in (None, 0, ""):
        return True
    numeric = (int, float)
    if isinstance(cached, numeric) and isinstance(recomputed, numeric) and not isinstance(cached, bool):
        return math.isclose(float(cached), float(recomputed), rel_tol=tol, abs_tol=tol)
    return cached == recomputed


def formula_cells(path):
    """[(sheet name, A1, formula, cached value)] for every formula cell."""
    import openpyxl

    formulas_book = openpyxl.load_workbook(path, data_only=False)
    values_book = openpyxl.load_workbook(path, data_only=True)
    found = []
    for name in formulas_book.sheetnames:
        for row in formulas_book[name].iter_rows():
            for cell in row:
                raw = cell.value
                if isinstance(raw, str) and raw.startswith("="):
                    found.append((name, cell.coordinate, raw, values_book[name][cell.coordinate].value))
                elif type(raw).__name__ in ("ArrayFormula", "DataTableFormula"):
                    found.append((name, cell.coordinate, str(getattr(raw, "text", raw)), values_book[name][cell.coordinate].value))
    return found


# --- writing cached values back into the sheet XML --------------------------------------------

_NS_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def sheet_parts(archive):
    """{sheet name: zip member of its XML}, read from workbook.xml and its relationships."""
    from xml.etree import ElementTree

    book = ElementTree.fromstring(archive.read("xl/workbook.xml"))
    rels = ElementTree.fromstring(archive.read("xl/_rels/workbook.xml.rels"))
    targets = {rel.get("Id"): rel.get("Target") for rel in rels}
    parts = {}
    for sheet in book.iter("{http://schemas.openxmlformats.org/spreadsheetml/2006/main}sheet"):
        target = targets.get(sheet.get(f"{{{_NS_REL}}}id"), "")
        member = target.lstrip("/") if target.startswith("/") else str(PurePosixPath("xl") / target)
        parts[sheet.get("name")] = member
    return parts


def cached_xml(value):
    """(type attribute or None, <v> text) for a recomputed value."""
    if isinstance(value, bool):
        return "b", "1" if value else "0"
    if isinstance(value, (int, float)):
        return None, repr(float(value)) if isinstance(value, float) else str(value)
    if isinstance(value, str) and value.startswith("#"):
        return "e", value
    return "str", "" if value is None else str(value)


def patch_sheet(xml, values):
    """Set the <v> of each formula cell in ``values`` {A1: value}; returns (xml, cells patched)."""
    patched = 0

    def replace(match):
        nonlocal patched
        attrs, inner = match.group(2) or "", match.group(3)
        ref = match.group(1)
        if ref not in values or "<f" not in inner:
            return match.group(0)
        kind, text = cached_xml(values[ref])
        attrs = re.sub(r'\s+t="[^"]*"', "", attrs)
        if kind:
            attrs += f' t="{kind}"'
        inner = re.sub(r"<v>.*?</v>|<v\s*/>", "", inner, flags=re.S)
        patched += 1
        return f'<c r="{ref}"{attrs}>{inner}<v>{escape(text)}</v></c>'

    xml = re.sub(r'<c r="([A-Z]+[0-9]+)"((?:\s+[^>]*?)?)>(.*?)</c>', replace, xml, flags=re.S)
    return xml, patched


def write_cache(source, target, recomputed, sheets):
    by_sheet = {}
    for name in sheets:
        by_sheet[name] = {ref: value for (sheet, ref), value in recomputed.items() if sheet == name.upper()}
    with zipfile.ZipFile(source) as archive:
        parts = sheet_parts(archive)
        member_values = {parts[name]: refs for name, refs in by_sheet.items() if name in parts}
        tmp = target + ".tmp"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            total = 0
            for info in archive.infolist():
                data = archive.read(info.filename)
                if info.filename in member_values:
                    text, count = patch_sheet(data.decode("utf-8"), member_values[info.filename])
                    data = text.encode("utf-8")
                    total += count
                out.writestr(info, data)
    shutil.move(tmp, target)
    return total


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("book", help="the .xlsx file")
    parser.add_argument("--tol", type=float, default=1e-9, help="relative/absolute tolerance for numbers")
    parser.add_argument("--json", action="store_true", help="print every formula cell as JSON")
    parser.add_argument("--write-cache", metavar="OUT", help="write a copy whose cached values are the recomputed ones")
    args = parser.parse_args(argv)
    for path in [args.book]:
        refused = problem(path)
        if refused:
            print(f"error: {refused}", file=sys.stderr)
            return 2
    try:
        cells = formula_cells(args.book)
        recomputed = recompute(args.book)
    except Exception as exc:
        print(f"error: cannot recompute {args.book}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    rows, mismatches, uncached, unevaluated = [], 0, 0, 0
    for sheet, ref, formula, cached in cells:
        key = (sheet.upper(), ref)
        if key not in recomputed:
            status = "not evaluated"
            unevaluated += 1
            value = None
        else:
            value = recomputed[key]
            if cached is None:
                status = "no cached value"
                uncached += 1
            elif agree(cached, value, args.tol):
                status = "ok"
            else:
                status = "mismatch"
                mismatches += 1
        rows.append({"cell": f"{sheet}!{ref}", "formula": formula, "cached": cached,
                     "recomputed": value, "status": status})
    if args.json:
        print(json.dumps({"cells": rows, "mismatches": mismatches, "no_cached_value": uncached,
                          "not_evaluated": unevaluated}, indent=2, default=str))
    else:
        for row in rows:
            if row["status"] != "ok":
                print(f"{row['cell']}\t{row['status']}\tcached={row['cached']!r}\trecomputed={row['recomputed']!r}\t{row['formula']}")
        print(f"# {len(rows)} formula cells: {mismatches} mismatch, {uncached} without cached value, "
              f"{unevaluated} not evaluated", file=sys.stderr)
    if args.write_cache:
        import openpyxl

        sheets = openpyxl.load_workbook(args.book, read_only=True).sheetnames
        count = write_cache(args.book, args.write_cache, recomputed, sheets)
        print(f"# wrote {args.write_cache}: {count} cached values set", file=sys.stderr)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
