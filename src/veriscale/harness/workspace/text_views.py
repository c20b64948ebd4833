"""Plain-text views of binary deliverables (xlsx, docx, pdf, pptx), written as sidecar files.

A model reads text, not zip archives. Each viewable file gets a sidecar beside it, named
``<file>.view.txt``, which is never counted as a deliverable::

    view = render_view(Path("model.xlsx"))      # ViewResult(text=..., truncated=..., error=...)
    sidecar = write_view(Path("model.xlsx"))     # writes model.xlsx.view.txt, returns its path

Formats:

- xlsx/xlsm: one line per non-empty cell, ``Sheet!A1<TAB>value<TAB>=formula``; the value is the
  cached value Excel saved (openpyxl ``data_only=True``), the formula comes from a second read.
  A formula cell with no cached value shows an empty value.
- docx: paragraphs in body order; a table row is one line of cells joined by `` | ``.
- pdf: the text of each page under a ``--- page N ---`` line.
- pptx: the text runs of each slide under a ``--- slide N ---`` line (read from the XML, no
  extra dependency).

A file that cannot be read gives a view that says so (``error`` set) instead of raising. A file
over ``max_file_bytes`` is not opened; a view longer than ``max_chars`` is cut and says so. Every
zip is inflated once under the caps of :mod:`.zip_limits` (and every pdf's flate streams) before
a library sees it; a file over a cap gives a view whose ``error`` is the one sentence that names
the file and the cap. ``view_worker`` renders views in a process with a deadline.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator
from xml.etree import ElementTree

from veriscale.harness.workspace.zip_limits import ArchiveRefused, ZipLimits, checked_pdf, checked_zip

SIDECAR_SUFFIX = ".view.txt"
VIEWABLE_SUFFIXES = frozenset({".xlsx", ".xlsm", ".docx", ".pdf", ".pptx"})
DEFAULT_MAX_FILE_BYTES = 50 * 1024 * 1024
DEFAULT_MAX_CHARS = 400_000


@dataclass(frozen=True)
class ViewResult:
    """The text view of one file; ``error`` is set when the file could not be read.

    ``refused`` is set (to the reason, e.g. which cap) when the host would not open the file.
    """

    text: str
    truncated: bool = False
    error: str | None = None
    refused: str | None = None


def is_viewable(path: Path) -> bool:
    """True when ``path`` has a format this module renders as text."""
    return path.suffix.lower() in VIEWABLE_SUFFIXES


def sidecar_path(path: Path) -> Path:
    """The sidecar path for ``path``: ``report.docx`` -> ``report.docx.view.txt``."""
    return path.with_name(path.name + SIDECAR_SUFFIX)


def is_sidecar(path: Path) -> bool:
    """True when ``path`` is a view sidecar of a viewable sibling file (which need not exist)."""
    if not path.name.endswith(SIDECAR_SUFFIX):
        return False
    return is_viewable(Path(path.name[: -len(SIDECAR_SUFFIX)]))


def render_view(
    path: Path,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_chars: int = DEFAULT_MAX_CHARS,
    limits: ZipLimits | None = None,
) -> ViewResult:
    """Render ``path`` as text; never raises for unreadable, oversized or inflating files."""
    limits = limits or ZipLimits.from_env()
    size = path.stat().st_size
    if size > max_file_bytes:
        return ViewResult(
            text=f"[not viewed: {path.name} is {size} bytes, over the {max_file_bytes}-byte cap]\n",
            truncated=True,
        )
    renderer = _RENDERERS.get(path.suffix.lower())
    if renderer is None:
        return ViewResult(text="", error=f"no text view for '{path.suffix}' files")
    lines: list[str] = []
    used = 0
    truncated = False
    try:
        for line in renderer(path, limits):
            if used + len(line) + 1 > max_chars:
                truncated = True
                break
            lines.append(line)
            used += len(line) + 1
    except ImportError as exc:
        reason = f"reading {path.suffix} files needs {exc.name}: pip install 'veriscale[office]'"
        return ViewResult(text=f"[could not be read: {path.name}: {reason}]\n", error=reason)
    except ArchiveRefused as exc:
        return refused_view(path, exc.reason)
    except Exception as exc:  # noqa: BLE001 - any parser failure means "could not be read"
        reason = f"{type(exc).__name__}: {exc}".strip()
        return ViewResult(
            text=f"[could not be read: {path.name}: {reason}]\n", error=reason
        )
    text = "\n".join(lines) + ("\n" if lines else "")
    if truncated:
        text += f"[truncated: view cut at {max_chars} characters]\n"
    return ViewResult(text=text, truncated=truncated)


def refused_view(path: Path, reason: str) -> ViewResult:
    """The view of a file the host would not open, saying why in one sentence."""
    sentence = f"{path.name} was not viewed: {reason}"
    return ViewResult(text=f"[{sentence}]\n", error=sentence, refused=reason)


def write_view(path: Path, view: ViewResult | None = None, **caps) -> tuple[Path, ViewResult]:
    """Write the sidecar of ``path`` (``view``, or one rendered here) and return (sidecar path, view)."""
    view = render_view(path, **caps) if view is None else view
    target = sidecar_path(path)
    target.write_text(view.text, encoding="utf-8")
    return target, view


# --- renderers: each yields lines of text ---------------------------------------------------


def _open_workbook(data: bytes, *, data_only: bool):
    import openpyxl

    return openpyxl.load_workbook(io.BytesIO(data), data_only=data_only, read_only=True)


def xlsx_cells(path: Path, limits: ZipLimits | None = None) -> Iterator[tuple[str, str, object, str | None]]:
    """Yield (sheet, cell ref, cached value, formula or None) for every non-empty cell."""
    data = checked_zip(path, limits or ZipLimits.from_env())
    values_book = _open_workbook(data, data_only=True)
    formula_book = _open_workbook(data, data_only=False)
    try:
        for sheet_name in formula_book.sheetnames:
            value_rows = values_book[sheet_name].iter_rows()
            for formula_row in formula_book[sheet_name].iter_rows():
                value_row = next(value_rows, ())
                cached = {getattr(c, "coordinate", None): c.value for c in value_row}
                for cell in formula_row:
                    raw = getattr(cell, "value", None)
                    coordinate = getattr(cell, "coordinate", None)
                    if raw is None or coordinate is None:
                        continue
                    formula = raw if isinstance(raw, str) and raw.startswith("=") else None
                    value = cached.get(coordinate) if formula else raw
                    yield sheet_name, coordinate, value, formula
    finally:
        values_book.close()
        formula_book.close()


def xlsx_sheetnames(path: Path, limits: ZipLimits | None = None) -> list[str]:
    """The sheet names of a workbook, in order."""
    book = _open_workbook(checked_zip(path, limits or ZipLimits.from_env()), data_only=False)
    try:
        return list(book.sheetnames)
    finally:
        book.close()


def _render_xlsx(path: Path, limits: ZipLimits) -> Iterator[str]:
    for sheet, ref, value, formula in xlsx_cells(path, limits):
        shown = "" if value is None else _one_line(str(value))
        yield f"{sheet}!{ref}\t{shown}\t{formula or ''}".rstrip("\t")


def docx_lines(path: Path, limits: ZipLimits | None = None) -> Iterator[str]:
    """Yield the paragraphs and table rows of a docx in body order."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = docx.Document(io.BytesIO(checked_zip(path, limits or ZipLimits.from_env())))
    for block in document.element.body.iterchildren():
        tag = block.tag.rsplit("}", 1)[-1]
        if tag == "p":
            text = Paragraph(block, document).text.strip()
            if text:
                yield text
        elif tag == "tbl":
            for row in Table(block, document).rows:
                yield " | ".join(_one_line(cell.text.strip()) for cell in row.cells)


def pdf_lines(path: Path, limits: ZipLimits | None = None) -> Iterator[str]:
    """Yield the text of each page of a pdf under a page marker."""
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(checked_pdf(path, limits or ZipLimits.from_env())))
    for number, page in enumerate(reader.pages, start=1):
        yield f"--- page {number} ---"
        yield from (page.extract_text() or "").splitlines()


_DRAWINGML_TEXT = "{http://schemas.openxmlformats.org/drawingml/2006/main}t"


def pptx_lines(path: Path, limits: ZipLimits | None = None) -> Iterator[str]:
    """Yield the text runs of each slide of a pptx under a slide marker (each slide streamed)."""
    with zipfile.ZipFile(io.BytesIO(checked_zip(path, limits or ZipLimits.from_env()))) as archive:
        slide_names = [
            n for n in archive.namelist() if re.fullmatch(r"ppt/slides/slide\d+\.xml", n)
        ]
        slide_names.sort(key=lambda n: int(re.search(r"(\d+)\.xml$", n).group(1)))  # type: ignore[union-attr]
        for number, name in enumerate(slide_names, start=1):
            yield f"--- slide {number} ---"
            with archive.open(name) as slide:
                yield from _text_runs(slide)


def _text_runs(slide) -> Iterator[str]:
    """The ``a:t`` texts of one slide part, each element dropped once read (memory stays flat)."""
    open_elements: list[ElementTree.Element] = []
    for event, node in ElementTree.iterparse(slide, events=("start", "end")):
        if event == "start":
            open_elements.append(node)
            continue
        open_elements.pop()
        if node.tag == _DRAWINGML_TEXT and node.text and node.text.strip():
            yield node.text.strip()
        if open_elements:
            open_elements[-1].remove(node)


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ").replace("\t", " ")


_RENDERERS = {
    ".xlsx": _render_xlsx,
    ".xlsm": _render_xlsx,
    ".docx": docx_lines,
    ".pdf": pdf_lines,
    ".pptx": pptx_lines,
}
