#!/usr/bin/env python3
"""Diff tabular or JSON deliverables across rollouts, row by row keyed by a column.

    python3 table_diff.py rollouts/*/deliverables/customers.csv --key customer_id
    python3 table_diff.py rollouts/*/deliverables/customers.csv --key email --ignore-case
    python3 table_diff.py rollouts/*/deliverables/summary.json

CSV (or JSON list of objects): rows are matched on --key; prints rows missing from some files
and fields whose values differ. Other JSON: flattened to paths (a.b[0].c) and compared value by
value. Numbers compare within --tol. Each file is labelled by its rollout folder
(rollouts/<label>/deliverables/), else its parent folder, else its path. Standard library only.
"""

import argparse
import csv
import json
import math
import sys
from pathlib import Path


def label_for(path):
    """rollouts/r03/deliverables/x.csv -> r03; otherwise the parent folder's name."""
    parts = Path(path).parts
    if "deliverables" in parts and parts.index("deliverables") > 0:
        return parts[parts.index("deliverables") - 1]
    return Path(path).parent.name or str(path)


def flatten(value, prefix=""):
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out or {prefix: {}}
    if isinstance(value, list):
        out = {}
        for index, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{index}]"))
        return out or {prefix: []}
    return {prefix: value}


def as_number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).replace(",", ""))
    except ValueError:
        return None


def same(a, b, tol):
    x, y = as_number(a), as_number(b)
    if x is not None and y is not None:
        return math.isclose(x, y, rel_tol=tol, abs_tol=tol)
    return a == b


def load_rows(path, key, ignore_case):
    text = Path(path).read_text(encoding="utf-8")
    if str(path).lower().endswith(".json"):
        data = json.loads(text)
        if not (isinstance(data, list) and all(isinstance(r, dict) for r in data)):
            return None
        rows = data
    else:
        rows = list(csv.DictReader(text.splitlines()))
    if key is None:
        raise SystemExit(f"error: {path} is a table: give --key COLUMN")
    keyed = {}
    for row in rows:
        if key not in row:
            raise SystemExit(f"error: {path} has no column {key!r}; columns: {', '.join(map(str, row))}")
        value = str(row[key])
        keyed.setdefault(value.lower() if ignore_case else value, []).append(row)
    return keyed


def main(argv=None):
    # A standalone program run by path in the jail: its own argument parsing, nothing shared.
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="two or more .csv or .json files")
    parser.add_argument("--key", help="column that identifies a row (tables)")
    parser.add_argument("--ignore-case", action="store_true", help="match keys case-insensitively")
    parser.add_argument("--tol", type=float, default=1e-9, help="tolerance for numbers")
    args = parser.parse_args(argv)
    if len(args.files) < 2:
        parser.error("give at least two files")
    labels = [label_for(p) for p in args.files]
    if len(set(labels)) < len(labels):
        labels = list(args.files)
    try:
        tables = [load_rows(p, args.key, args.ignore_case) if args.key or not p.lower().endswith(".json") else None
                  for p in args.files]
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    differences = 0
    if all(t is not None for t in tables):
        for label, table in zip(labels, tables):
            for key, rows in table.items():
                if len(rows) > 1:
                    print(f"duplicate key\t{key}\t{label} has {len(rows)} rows")
        keys = sorted(set().union(*tables))
        for key in keys:
            present = [label for label, t in zip(labels, tables) if key in t]
            if len(present) < len(labels):
                differences += 1
                print(f"row {key}\tpresent in {', '.join(present)}; missing in "
                      f"{', '.join(l for l in labels if l not in present)}")
                continue
            rows = [t[key][0] for t in tables]
            for column in sorted(set().union(*[r.keys() for r in rows])):
                values = [r.get(column) for r in rows]
                if any(not same(values[0], v, args.tol) for v in values[1:]):
                    differences += 1
                    print(f"row {key}\t{column}\t" + "\t".join(f"{l}={v!r}" for l, v in zip(labels, values)))
    else:
        flats = [flatten(json.loads(Path(p).read_text(encoding="utf-8"))) for p in args.files]
        for path in sorted(set().union(*flats)):
            values = [f.get(path, "<missing>") for f in flats]
            if any(not same(values[0], v, args.tol) for v in values[1:]):
                differences += 1
                print(f"{path}\t" + "\t".join(f"{l}={v!r}" for l, v in zip(labels, values)))
    print(f"# {differences} difference(s) across {len(labels)} files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
