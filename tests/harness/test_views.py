"""Text views of binary deliverables: content, sidecar naming, caps, unreadable files."""

from __future__ import annotations

import zipfile
from pathlib import Path

import docx
import openpyxl

from tests.harness.zip_bombs import one_page_pdf
from veriscale.harness.workspace.text_views import is_sidecar, render_view, sidecar_path, write_view


def _minimal_pdf(text: str) -> bytes:
    """A one-page PDF with ``text`` in Helvetica."""
    return one_page_pdf(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode())


def test_xlsx_view_has_one_line_per_cell_with_cached_value_and_formula(fixture_root: Path) -> None:
    view = render_view(fixture_root / "finance_workbook" / "rollouts" / "opus-run-3" / "model.xlsx")
    lines = view.text.splitlines()
    assert view.error is None and not view.truncated
    assert "Revenue!A1\tQuarter" in lines
    assert "Costs!D6\t257000\t=SUM(D2:D4)" in lines  # this run left Q4 out of total costs
    assert "Summary!B6\t0.1875\t=B1/480000-1" in lines


def test_xlsx_formula_without_cached_value_shows_empty_value(tmp_path: Path) -> None:
    book = openpyxl.Workbook()
    book.active.title = "S"
    book.active["A1"] = 2
    book.active["A2"] = "=A1*3"
    book.save(tmp_path / "fresh.xlsx")  # openpyxl never computes formulas
    assert render_view(tmp_path / "fresh.xlsx").text.splitlines() == ["S!A1\t2", "S!A2\t\t=A1*3"]


def test_docx_view_keeps_paragraphs_and_tables_in_order(fixture_root: Path) -> None:
    text = render_view(fixture_root / "quarterly_report" / "rollouts" / "w2" / "report.docx").text
    lines = text.splitlines()
    assert lines[0] == "Q3 2024 results"
    assert "Year-over-year revenue growth: 16.7%" in lines
    assert lines.index("Active customers: 1,240") < lines.index("Revenue ($M) | 3.5 | 4.2")


def test_pdf_view_has_page_markers_and_text(tmp_path: Path) -> None:
    path = tmp_path / "note.pdf"
    path.write_bytes(_minimal_pdf("Total revenue 570000"))
    view = render_view(path)
    assert view.error is None
    assert view.text.splitlines()[0] == "--- page 1 ---"
    assert "Total revenue 570000" in view.text


def test_pptx_view_reads_slide_text_runs(tmp_path: Path) -> None:
    path = tmp_path / "deck.pptx"
    slide = (
        '<p:sld xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
        'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><p:cSld><p:spTree>'
        "<p:sp><p:txBody><a:p><a:r><a:t>{}</a:t></a:r></a:p></p:txBody></p:sp>"
        "</p:spTree></p:cSld></p:sld>"
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("ppt/slides/slide10.xml", slide.format("Appendix"))
        archive.writestr("ppt/slides/slide2.xml", slide.format("Margin 18.1%"))
    assert render_view(path).text.splitlines() == ["--- slide 1 ---", "Margin 18.1%", "--- slide 2 ---", "Appendix"]


def test_corrupt_files_give_a_view_that_says_so_instead_of_raising(tmp_path: Path) -> None:
    for name in ("broken.xlsx", "broken.docx", "broken.pdf"):
        path = tmp_path / name
        path.write_bytes(b"this is not an office file")
        sidecar, view = write_view(path)
        assert view.error
        assert sidecar.read_text().startswith(f"[could not be read: {name}:")


def test_docx_that_is_a_zip_without_a_document_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "empty.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "no word document in here")
    assert render_view(path).error


def test_file_over_the_byte_cap_is_not_opened(tmp_path: Path) -> None:
    path = tmp_path / "big.xlsx"
    path.write_bytes(b"x" * 2048)  # not even a workbook: proves it was never parsed
    view = render_view(path, max_file_bytes=1024)
    assert view.truncated and view.error is None
    assert "over the 1024-byte cap" in view.text


def test_long_view_is_cut_and_says_truncated(tmp_path: Path) -> None:
    document = docx.Document()
    for i in range(200):
        document.add_paragraph(f"Line {i} of a long report")
    document.save(tmp_path / "long.docx")
    view = render_view(tmp_path / "long.docx", max_chars=500)
    assert view.truncated
    assert len(view.text) < 600
    assert view.text.rstrip().endswith("[truncated: view cut at 500 characters]")


def test_sidecar_naming_and_recognition() -> None:
    assert sidecar_path(Path("out/report.docx")) == Path("out/report.docx.view.txt")
    assert is_sidecar(Path("report.docx.view.txt"))
    assert is_sidecar(Path("model.XLSX.view.txt"))
    assert not is_sidecar(Path("notes.view.txt"))  # a deliverable that merely ends that way
    assert not is_sidecar(Path("report.docx"))
