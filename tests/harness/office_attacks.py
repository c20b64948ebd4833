"""Build office files that point outside themselves (issue 30, round three, finding 1).

    linked_workbook(path, key)                  # cells "=[1]Summary!B1" + an xl/externalLinks part naming `key`
    linked_workbook(path, key, link_part=False, seen_from=folder)  # "='../../keys/[golden.xlsx]Summary'!B1", no such part
    formula_workbook(path)                      # an honest workbook: formulas within itself
    with_doctype(path, "xl/worksheets/sheet1.xml")  # a DTD in front of a part's root element
    hyperlink_docx(path)                        # a docx with an ordinary external hyperlink (must still pass)

Every workbook is a real openpyxl file (so the libraries read it as they would a delivery); the
external parts are added to its zip by hand, as Excel writes them.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import openpyxl

SHEET_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
REL_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PKG_REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
EXTERNAL_LINK_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.externalLink+xml"


def numeric_cells(key: Path) -> dict[str, list[str]]:
    """{sheet: [A1, ...]} of every cell of ``key`` that holds a number or a formula."""
    book = openpyxl.load_workbook(key)
    cells: dict[str, list[str]] = {}
    for sheet in book.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                value = cell.value
                if isinstance(value, (int, float)) or (isinstance(value, str) and value.startswith("=")):
                    cells.setdefault(sheet.title, []).append(cell.coordinate)
    return cells


def _rewrite(path: Path, changes: dict[str, bytes | None], added: dict[str, bytes]) -> None:
    """Rewrite the zip at ``path``: ``changes`` replaces members (None drops one), ``added`` appends."""
    with zipfile.ZipFile(path) as source:
        members = [(info, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as target:
        for info, data in members:
            if info.filename in changes:
                if changes[info.filename] is None:
                    continue
                data = changes[info.filename]  # type: ignore[assignment]
            target.writestr(info.filename, data)
        for name, data in added.items():
            target.writestr(name, data)


def _member(path: Path, name: str) -> bytes:
    with zipfile.ZipFile(path) as archive:
        return archive.read(name)


def linked_workbook(path: Path, key: Path, *, link_part: bool = True, seen_from: Path | None = None) -> Path:
    """A workbook whose every cell that is a number in ``key`` is a reference into ``key`` itself.

    ``link_part=True``: cells read ``=[1]Sheet!A1`` and ``xl/externalLinks/externalLink1.xml``
    (with its relationship, ``TargetMode="External"``) names ``key`` by its absolute path.
    ``link_part=False``: the path is written in each formula (``='../../dir/[key.xlsx]Sheet'!A1``),
    relative to ``seen_from``, the folder the reader will open the workbook in (``formulas``
    resolves it from there).
    """
    key = Path(key).resolve()
    folder = os.path.relpath(key.parent, Path(seen_from or Path(path).parent).resolve())
    cells = numeric_cells(key)
    book = openpyxl.Workbook()
    book.remove(book.active)
    for sheet_name, coordinates in cells.items():
        sheet = book.create_sheet(sheet_name)
        for coordinate in coordinates:
            if link_part:
                sheet[coordinate] = f"=[1]{sheet_name}!{coordinate}"
            else:
                sheet[coordinate] = f"='{folder}/[{key.name}]{sheet_name}'!{coordinate}"
    book.save(path)
    if not link_part:
        return path
    names = "".join(f'<sheetName val="{name}"/>' for name in cells)
    link = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<externalLink xmlns="{SHEET_NS}" '
            f'xmlns:r="{REL_NS}"><externalBook r:id="rId1"><sheetNames>{names}</sheetNames>'
            f'</externalBook></externalLink>').encode()
    link_rels = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="{PKG_REL_NS}">'
                 f'<Relationship Id="rId1" Type="{REL_NS}/externalLinkPath" Target="{key}" '
                 f'TargetMode="External"/></Relationships>').encode()
    workbook = _member(path, "xl/workbook.xml").replace(
        b"</sheets>", f'</sheets><externalReferences><externalReference xmlns:r="{REL_NS}" r:id="rIdExt1"/>'
        f'</externalReferences>'.encode(), 1)
    rels = _member(path, "xl/_rels/workbook.xml.rels").replace(
        b"</Relationships>", f'<Relationship Id="rIdExt1" Type="{REL_NS}/externalLink" '
        f'Target="externalLinks/externalLink1.xml"/></Relationships>'.encode(), 1)
    types = _member(path, "[Content_Types].xml").replace(
        b"</Types>", f'<Override PartName="/xl/externalLinks/externalLink1.xml" '
        f'ContentType="{EXTERNAL_LINK_TYPE}"/></Types>'.encode(), 1)
    _rewrite(path, {"xl/workbook.xml": workbook, "xl/_rels/workbook.xml.rels": rels, "[Content_Types].xml": types},
             {"xl/externalLinks/externalLink1.xml": link, "xl/externalLinks/_rels/externalLink1.xml.rels": link_rels})
    return path


def formula_workbook(path: Path) -> Path:
    """An ordinary workbook with formulas within itself (and one across its own sheets)."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Revenue"
    for row, value in enumerate((120000, 135000, 150000, 165000), start=2):
        sheet[f"B{row}"] = value
    sheet["B6"] = "=SUM(B2:B5)"
    summary = book.create_sheet("Summary")
    summary["B1"] = "=Revenue!B6"
    summary["B2"] = "='Revenue'!B6/4"
    book.save(path)
    return path


def with_doctype(path: Path, part: str) -> Path:
    """Put a DTD (an internal entity) in front of the root element of ``part``."""
    data = _member(path, part)
    head, sep, rest = data.partition(b"?>")
    doctype = b'<!DOCTYPE x [<!ENTITY e "expanded">]>'
    data = head + sep + doctype + rest if sep else doctype + data
    _rewrite(path, {part: data}, {})
    return path


def replace_part(path: Path, source: Path, part: str, data: bytes) -> Path:
    """A copy of ``source`` at ``path`` with ``part`` replaced by ``data``."""
    path.write_bytes(Path(source).read_bytes())
    _rewrite(path, {part: data}, {})
    return path


def hyperlink_docx(path: Path, url: str = "https://example.com/q3") -> Path:
    """A docx with one paragraph holding an ordinary external hyperlink (``TargetMode="External"``)."""
    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml.ns import qn
    from docx.oxml import OxmlElement

    document = docx.Document()
    paragraph = document.add_paragraph("Revenue: 570,000 (source: ")
    rel_id = paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rel_id)
    run = OxmlElement("w:r")
    text = OxmlElement("w:t")
    text.text = "the ledger"
    run.append(text)
    link.append(run)
    paragraph._p.append(link)
    paragraph.add_run(")")
    document.save(path)
    return path


def attached_template_docx(path: Path, target: str) -> Path:
    """A docx whose settings part names an external attached template (a file Word would open)."""
    hyperlink_docx(path)
    rels_name = "word/_rels/settings.xml.rels"
    with zipfile.ZipFile(path) as archive:
        has_rels = rels_name in archive.namelist()
    rels = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="{PKG_REL_NS}">'
            f'<Relationship Id="rIdT1" Type="{REL_NS}/attachedTemplate" Target="{target}" '
            f'TargetMode="External"/></Relationships>').encode()
    _rewrite(path, {rels_name: rels} if has_rels else {}, {} if has_rels else {rels_name: rels})
    return path


def field_docx(path: Path, instruction: str, *, split: bool = True) -> Path:
    """A docx whose body holds one field with ``instruction``, its text split over two runs (as Word writes it)."""
    hyperlink_docx(path)
    half = len(instruction) // 2 if split else len(instruction)
    parts = [instruction[:half], instruction[half:]] if split else [instruction]
    runs = "".join(f'<w:r><w:instrText xml:space="preserve">{part}</w:instrText></w:r>' for part in parts)
    field = (f'<w:p><w:r><w:fldChar w:fldCharType="begin"/></w:r>{runs}<w:r><w:fldChar w:fldCharType="separate"/>'
             f'</w:r><w:r><w:t>shown</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r></w:p>').encode()
    document = _member(path, "word/document.xml").replace(b"<w:sectPr", field + b"<w:sectPr", 1)
    _rewrite(path, {"word/document.xml": document}, {})
    return path
