#!/usr/bin/env python3
"""Print a .docx in body order with locations: paragraphs (P#, style) and table cells (T#.R#.C#).

    python3 docx_dump.py report.docx
    python3 docx_dump.py report.docx --tables-only
    python3 docx_dump.py report.docx --meta          # author, created/modified, revision, sections

Locations let you cite evidence ("T1.R3.C2 says 0.56") and point a repair at the exact spot.
Headers and footers are printed after the body. Needs python-docx.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_lib"))
from office_caps import problem  # noqa: E402 - veriscale's inflation caps, checked before any library opens a file


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("document", help="the .docx file")
    parser.add_argument("--tables-only", action="store_true", help="only table cells")
    parser.add_argument("--meta", action="store_true", help="print document properties first")
    args = parser.parse_args(argv)
    for path in [args.document]:
        refused = problem(path)
        if refused:
            print(f"error: {refused}", file=sys.stderr)
            return 2
    try:
        import docx
        from docx.table import Table
        from docx.text.paragraph import Paragraph

        document = docx.Document(args.document)
    except Exception as exc:
        print(f"error: cannot read {args.document}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if args.meta:
        props = document.core_properties
        for key in ("title", "author", "last_modified_by", "created", "modified", "revision"):
            print(f"meta.{key}\t{getattr(props, key)}")
        print(f"meta.sections\t{len(document.sections)}")
    paragraph_no = table_no = 0
    for block in document.element.body.iterchildren():
        tag = block.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph_no += 1
            paragraph = Paragraph(block, document)
            if not args.tables_only and paragraph.text.strip():
                style = paragraph.style.name if paragraph.style is not None else ""
                print(f"P{paragraph_no}\t[{style}]\t{paragraph.text.strip()}")
        elif tag == "tbl":
            table_no += 1
            for r, row in enumerate(Table(block, document).rows, start=1):
                for c, cell in enumerate(row.cells, start=1):
                    text = " ".join(cell.text.split())
                    if text:
                        print(f"T{table_no}.R{r}.C{c}\t{text}")
    if not args.tables_only:
        for s, section in enumerate(document.sections, start=1):
            for kind, part in (("header", section.header), ("footer", section.footer)):
                for paragraph in part.paragraphs:
                    if paragraph.text.strip():
                        print(f"S{s}.{kind}\t{paragraph.text.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
