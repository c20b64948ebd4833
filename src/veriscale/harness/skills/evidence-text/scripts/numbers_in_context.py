#!/usr/bin/env python3
"""List every number in text files with its file, line and surrounding words.

    python3 numbers_in_context.py report.md
    python3 numbers_in_context.py rollouts/*/deliverables/report.md --near growth
    python3 numbers_in_context.py notes.md --width 60

Numbers include thousands separators, decimals, percentages, currency signs and a sign
(-1,240.5, $4.2, 18.1%). Output: file:line<TAB>number<TAB>normalised<TAB>context. The
normalised column turns "1,240" into 1240 and "18.1%" into 0.181 so values written differently
can be compared. Works on .md/.txt/.csv/.json and on the *.view.txt views of office files.
"""

import argparse
import re
import sys

NUMBER = re.compile(r"(?<![\w.])([-+\u2212]?[$\u20ac\u00a3]?\d{1,3}(?:,\d{3})+(?:\.\d+)?|[-+\u2212]?[$\u20ac\u00a3]?\d+(?:\.\d+)?)(\s?%)?")


def normalise(text, percent):
    cleaned = text.replace(",", "").replace("\u2212", "-")
    cleaned = re.sub(r"[$\u20ac\u00a3]", "", cleaned)
    value = float(cleaned)
    return value / 100 if percent else value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="text files")
    parser.add_argument("--near", help="only numbers whose context contains this word (case-insensitive)")
    parser.add_argument("--width", type=int, default=40, help="characters of context on each side")
    args = parser.parse_args(argv)
    status = 0
    for path in args.files:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = handle.read().splitlines()
        except OSError as exc:
            print(f"error: cannot read {path}: {exc}", file=sys.stderr)
            status = 2
            continue
        for line_no, line in enumerate(lines, start=1):
            for match in NUMBER.finditer(line):
                start, end = match.span()
                context = line[max(0, start - args.width): end + args.width].strip()
                if args.near and args.near.lower() not in context.lower():
                    continue
                value = normalise(match.group(1), bool(match.group(2)))
                print(f"{path}:{line_no}\t{match.group(0).strip()}\t{value:g}\t{context}")
    return status


if __name__ == "__main__":
    sys.exit(main())
