#!/usr/bin/env python3
"""Print a PDF's text page by page, with line numbers, and optionally its metadata.

    python3 pdf_text.py paper.pdf
    python3 pdf_text.py paper.pdf --page 3
    python3 pdf_text.py paper.pdf --meta            # producer, dates, page count, outline

Lines are "p<page>:<line><TAB>text" so a finding can cite where it came from. Text extraction
can reorder columns and drop tables' structure: check a surprising number against the page
layout before trusting it. Needs pypdf.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_lib"))
from office_caps import problem  # noqa: E402 - veriscale's inflation caps, checked before any library opens a file


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdf", help="the .pdf file")
    parser.add_argument("--page", type=int, help="only this page (1-based)")
    parser.add_argument("--meta", action="store_true", help="print metadata first")
    args = parser.parse_args(argv)
    for path in [args.pdf]:
        refused = problem(path)
        if refused:
            print(f"error: {refused}", file=sys.stderr)
            return 2
    try:
        import pypdf

        reader = pypdf.PdfReader(args.pdf)
        pages = reader.pages
    except Exception as exc:
        print(f"error: cannot read {args.pdf}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if args.meta:
        meta = reader.metadata or {}
        for key, value in sorted(meta.items()):
            print(f"meta.{key.lstrip('/')}\t{value}")
        print(f"meta.pages\t{len(pages)}")
        for item in reader.outline if isinstance(reader.outline, list) else []:
            title = getattr(item, "title", None)
            if title:
                print(f"meta.outline\t{title}")
    if args.page is not None and not 1 <= args.page <= len(pages):
        print(f"error: page {args.page} is out of range 1..{len(pages)}", file=sys.stderr)
        return 2
    for number, page in enumerate(pages, start=1):
        if args.page is not None and number != args.page:
            continue
        for line_no, line in enumerate((page.extract_text() or "").splitlines(), start=1):
            if line.strip():
                print(f"p{number}:{line_no}\t{line.rstrip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
