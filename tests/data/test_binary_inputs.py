"""Issue 30: a PNG (or any binary file) given as a candidate or task is refused in plain words.

The refusal says what the file looks like (its magic bytes: PNG, JPEG, PDF, an Excel workbook,
gzip, an ELF program, an SQLite database...) and what to give instead, never "byte 0 is 0x89";
a text file that is simply not UTF-8 still names the position of the first bad byte.
"""

from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path

import pytest

from tests.inputs.cli import one_sentence, run_cli
from veriscale.data.reader import BadInput, binary_kind, decode_text

PAIR = Path(__file__).resolve().parents[2] / "examples" / "pair"
TASK = str(PAIR / "task.md")
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01" + bytes(range(256))


def _office(prefix: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr(f"{prefix}document.xml", "<x/>\xff")
    return buf.getvalue()


def test_a_png_candidate_is_read_as_an_image_and_a_broken_one_is_named(tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    shot.write_bytes(PNG)  # PNG magic, no image after it
    err = one_sentence(run_cli("compare", TASK, str(shot), str(PAIR / "b.md"), "--dry-run"),
                       "image 'shot.png' cannot be read as an image", "give a PNG, JPEG, WebP or GIF file")
    assert "0x89" not in err and "byte 0" not in err
    from PIL import Image

    Image.new("RGB", (8, 8), (200, 0, 0)).save(shot)  # a real image, on the text-only embedded model
    one_sentence(run_cli("compare", TASK, str(shot), str(PAIR / "b.md"), "--dry-run"),
                 "the embedded model", "has no vision", "--model", "--mmproj")


def test_a_png_task_or_stdin_candidate_in_score_is_named_as_an_image(tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    shot.write_bytes(PNG)
    one_sentence(run_cli("score", str(shot), str(PAIR / "a.md"), "--dry-run"), "task", "is a PNG image, not text",
                 "docs/VISION.md")
    one_sentence(run_cli("score", TASK, "-", "--dry-run", stdin=PNG), "candidate from stdin", "is a PNG image")


def test_select_names_a_binary_candidate_file(tmp_path: Path) -> None:
    book = tmp_path / "run.xlsx"
    book.write_bytes(_office("xl/"))
    one_sentence(run_cli("select", "--task", TASK, str(PAIR / "a.md"), str(book), "--dry-run"),
                 "run.xlsx", "an Excel workbook", "harness materialize")


@pytest.mark.parametrize(("data", "kind", "fix"), [
    (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\xff", "a JPEG image", "with a vision model"),
    (b"GIF89a\x01\x00\x01\x00\x80\xff", "a GIF image", "with a vision model"),
    (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "a PDF document", "harness materialize"),
    (_office("xl/"), "an Excel workbook (.xlsx)", "harness materialize"),
    (_office("word/"), "a Word document (.docx)", "harness materialize"),
    (_office("other/"), "a ZIP archive", "unpack it"),
    (gzip.compress(b"hello " * 100), "gzip-compressed data", "gunzip"),
    (b"\x7fELF\x02\x01\x01\x00" + bytes(8) + b"\xff", "an ELF program", "text, transcript or log"),
    (b"SQLite format 3\x00\x10\x00\x01\x01\xff", "an SQLite database", "export the runs"),
])
def test_magic_bytes_name_the_format_and_the_fix(tmp_path: Path, data: bytes, kind: str, fix: str) -> None:
    assert binary_kind(data) is not None
    with pytest.raises(BadInput) as caught:
        decode_text(data, "candidate 'x'")
    message = str(caught.value)
    assert f"candidate 'x' is {kind}" in message and "not text" in message and fix in message
    assert "0x" not in message
    path = tmp_path / "candidate.bin"
    path.write_bytes(data)
    one_sentence(run_cli("compare", TASK, str(PAIR / "a.md"), str(path), "--dry-run"), "candidate B", kind, fix)


def test_text_that_is_not_utf8_names_the_position_in_plain_words(tmp_path: Path) -> None:
    latin = tmp_path / "latin.md"
    latin.write_bytes(b"r\xe9ponse")
    err = one_sentence(run_cli("score", TASK, str(latin), "--dry-run"), "latin.md",
                       "is not UTF-8 text (an invalid byte at position 1)")
    assert "0xe9" not in err
