"""Decompression bombs in rollouts: every zip and pdf the host opens is inflated under counted caps.

Real bombs are built in tmp (tests/harness/zip_bombs.py): office files whose one part inflates to
512 MiB from about half a megabyte, a header that lies about its size, a rollout zip nested
inside a rollout zip, a pdf with a 512 MiB flate stream. ``materialize`` runs in a subprocess
that reports its own peak resident memory and its view worker's: both stay far below the bomb.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import docx
import openpyxl
import pytest

from tests.harness.zip_bombs import MIB, SLIDE_HEAD, SLIDE_TAIL, Member, write_pdf, write_zip, zip_bytes
from veriscale.data.importers import load_file
from veriscale.errors import UserError
from veriscale.harness.claims.extract_worker import extract_claims
from veriscale.harness.workspace.safe_copy import extract_zip
from veriscale.harness.workspace.view_worker import ViewWorker
from veriscale.harness.workspace.text_views import render_view
from veriscale.harness.workspace.zip_limits import ArchiveRefused, Inflation, ZipLimits, checked_pdf, checked_zip

BOMB_MIB = 512
PEAK_CAP_MIB = 400  # the process that read a 512 MiB part whole would be past this
DOCX_HEAD = (b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
             b"<w:body><w:p><w:r><w:t>")
DOCX_TAIL = b"</w:t></w:r></w:p></w:body></w:document>"
SHEET_HEAD = (b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
              b'<row r="1"><c r="A1" t="inlineStr"><is><t>')
SHEET_TAIL = b"</t></is></c></row></sheetData></worksheet>"

DRIVER = """
import json, resource, sys
from pathlib import Path
from veriscale.harness.workspace.materialize import materialize
def peak_mib():  # this process's own peak (VmHWM: per address space, so not the forking parent's ru_maxrss)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
report = materialize(Path(sys.argv[1]), Path(sys.argv[2]))
usage = {"RUSAGE_SELF": peak_mib(), "RUSAGE_CHILDREN": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
print(json.dumps({"warnings": report.warnings, "views": report.views, "peak_mib": usage}))
"""


def _with_part_replaced(real: Path, bomb: Member) -> Path:
    """``real`` (a file a library wrote) rewritten with its part ``bomb.name`` replaced by ``bomb``."""
    with zipfile.ZipFile(real) as archive:
        parts = [Member(info.filename, b"", stored=archive.read(info)) for info in archive.infolist()
                 if info.filename != bomb.name]
    return write_zip(real, [*parts, bomb])


def _docx_bomb(path: Path, **forge: int) -> Path:
    document = docx.Document()
    document.add_paragraph("placeholder")
    document.save(path)
    return _with_part_replaced(path, Member("word/document.xml", DOCX_HEAD, DOCX_TAIL, BOMB_MIB, **forge))


def _xlsx_bomb(path: Path) -> Path:
    book = openpyxl.Workbook()
    book.active["A1"] = "placeholder"
    book.save(path)
    return _with_part_replaced(path, Member("xl/worksheets/sheet1.xml", SHEET_HEAD, SHEET_TAIL, BOMB_MIB))


def _small_pptx(path: Path, text: str) -> Path:
    return write_zip(path, [Member("ppt/slides/slide1.xml", b"", stored=SLIDE_HEAD + text.encode() + SLIDE_TAIL)])


@pytest.fixture(scope="module")
def bomb_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A source task: rollout ``bombs`` holds one bomb per format and a good file beside them;
    rollout ``nested.zip`` holds a bomb pptx and a zip of a bomb (never opened by the host)."""
    source = tmp_path_factory.mktemp("bombs") / "source"
    bombs = source / "rollouts" / "bombs"
    bombs.mkdir(parents=True)
    (source / "task.md").write_text("Summarise the quarter.\n")
    write_zip(bombs / "deck.pptx", [Member("ppt/slides/slide1.xml", SLIDE_HEAD, SLIDE_TAIL, BOMB_MIB)])
    _docx_bomb(bombs / "report.docx")
    _docx_bomb(bombs / "forged.docx", declared_size=1000)  # says 1,000 bytes, with their true CRC
    _xlsx_bomb(bombs / "model.xlsx")
    write_pdf(bombs / "paper.pdf", BOMB_MIB)
    _small_pptx(bombs / "good.pptx", "Revenue 570000")
    (bombs / "notes.md").write_text("Revenue was 570000.\n")
    inner = zip_bytes([Member("huge.bin", b"", b"", BOMB_MIB)])
    pptx = zip_bytes([Member("ppt/slides/slide1.xml", SLIDE_HEAD, SLIDE_TAIL, BOMB_MIB)])
    with zipfile.ZipFile(source / "rollouts" / "nested.zip", "w") as outer:
        outer.writestr("inner.zip", inner)
        outer.writestr("deck.pptx", pptx)
        outer.writestr("notes.md", "Revenue was 560000.\n")
    return source


@pytest.fixture(scope="module")
def materialized_bombs(bomb_source: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    dest = tmp_path_factory.mktemp("bombs-out") / "task"
    done = subprocess.run([sys.executable, "-c", DRIVER, str(bomb_source), str(dest)],
                          capture_output=True, text=True, timeout=900, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    return dest, json.loads(done.stdout.strip().splitlines()[-1])


def _rollout_of(dest: Path, file_name: str, holding: str) -> Path:
    matches = [p for p in (dest / "rollouts").glob(f"r*/deliverables/{file_name}") if (p.parent / holding).exists()]
    assert len(matches) == 1, matches
    return matches[0]


def test_materialize_peak_memory_stays_bounded_with_bombs_in_every_format(materialized_bombs) -> None:
    _dest, result = materialized_bombs
    assert result["peak_mib"]["RUSAGE_SELF"] < PEAK_CAP_MIB, result
    assert result["peak_mib"]["RUSAGE_CHILDREN"] < PEAK_CAP_MIB, result  # the view worker


@pytest.mark.parametrize("name, cap", [("deck.pptx", "VERISCALE_ZIP_MEMBER_MB"), ("report.docx", "VERISCALE_ZIP_MEMBER_MB"),
                                       ("model.xlsx", "VERISCALE_ZIP_MEMBER_MB"), ("paper.pdf", "VERISCALE_ZIP_MEMBER_MB")])
def test_each_bomb_is_a_reported_view_problem_naming_the_file_and_the_cap(materialized_bombs, name: str, cap: str) -> None:
    dest, result = materialized_bombs
    path = _rollout_of(dest, name, "good.pptx")
    rel = path.relative_to(dest).as_posix()
    problem = [w for w in result["warnings"] if w.startswith(f"{rel} was not viewed:")]
    assert len(problem) == 1, result["warnings"]
    assert "32 MiB per-member cap" in problem[0] and cap in problem[0]
    assert "\n" not in problem[0] and problem[0].count("; ") == 1  # one sentence: the why, then the fix
    sidecar = path.with_name(path.name + ".view.txt").read_text()
    assert sidecar.startswith(f"[{name} was not viewed:") and cap in sidecar


def test_forged_size_header_is_counted_past_not_trusted(materialized_bombs) -> None:
    """zipfile alone reads this member fine: it inflates all 512 MiB in one call, then keeps the
    1,000 bytes the header declares, whose CRC matches. The count goes on to the real end."""
    dest, result = materialized_bombs
    rel = _rollout_of(dest, "forged.docx", "good.pptx").relative_to(dest).as_posix()
    assert f"{rel} was not viewed: its part 'word/document.xml' inflates past the 32 MiB per-member cap " \
           "(VERISCALE_ZIP_MEMBER_MB); raise that setting if the file is trusted" in result["warnings"]


def test_the_rest_of_the_rollouts_still_materializes(materialized_bombs) -> None:
    dest, result = materialized_bombs
    good = _rollout_of(dest, "good.pptx", "paper.pdf")
    assert good.with_name("good.pptx.view.txt").read_text().splitlines() == ["--- slide 1 ---", "Revenue 570000"]
    assert (good.parent / "notes.md").read_text() == "Revenue was 570000.\n"
    nested = _rollout_of(dest, "deck.pptx", "inner.zip")
    assert (nested.parent / "notes.md").is_file()
    assert zipfile.is_zipfile(nested.parent / "inner.zip")  # a zip deliverable is kept, never unpacked
    assert "inner.zip.view.txt" not in {p.name for p in nested.parent.iterdir()}
    rel = nested.relative_to(dest).as_posix()
    assert any(w.startswith(f"{rel} was not viewed:") for w in result["warnings"]), result["warnings"]


def test_claims_of_a_bomb_are_a_warning_and_its_presence(materialized_bombs) -> None:
    dest, _result = materialized_bombs
    deliverables = _rollout_of(dest, "good.pptx", "paper.pdf").parent
    files = {name: deliverables / name for name in ("report.docx", "model.xlsx", "paper.pdf", "notes.md")}
    claims, warnings = extract_claims({"r01": files})
    assert len(warnings) == 3 and all("was not opened" in w and "VERISCALE_ZIP_MEMBER_MB" in w for w in warnings), warnings
    keys = {claim.key for claim in claims["r01"]}
    assert {"report.docx:(file)", "model.xlsx:(file)", "paper.pdf:(file)", "notes.md:revenue"} <= keys


def test_inflated_bytes_are_counted_whatever_the_header_declares(tmp_path: Path) -> None:
    honest = write_zip(tmp_path / "honest.zip", [Member("part.xml", b"<a>", b"</a>", 3)])
    limits = ZipLimits(member_bytes=2 * MIB)
    with pytest.raises(ArchiveRefused, match=r"'part.xml' inflates past the 2 MiB per-member cap \(VERISCALE_ZIP_MEMBER_MB\)"):
        checked_zip(honest, limits)
    with zipfile.ZipFile(honest) as archive:  # the counter stops one chunk past the cap, not at the end
        inflation = Inflation("'honest.zip'", limits)
        seen = 0
        with pytest.raises(ArchiveRefused):
            for chunk in inflation.chunks(archive, archive.getinfo("part.xml")):
                seen += len(chunk)
        assert 2 * MIB - 65536 <= seen <= 2 * MIB
    lying = write_zip(tmp_path / "lying.zip", [Member("part.xml", b"<a>", b"</a>", 1, declared_size=10)])
    with zipfile.ZipFile(lying) as archive:
        assert archive.read("part.xml") == b"<a>AAAAAAA"  # zipfile believes the header (CRC and all)
    with pytest.raises(ArchiveRefused, match=r"'part.xml' inflates to 1,048,583 bytes while its header declares 10;"):
        checked_zip(lying, limits)
    with pytest.raises(ArchiveRefused, match=r"'part.xml' inflates past the 2 MiB per-member cap"):
        checked_zip(write_zip(tmp_path / "lying-big.zip", [Member("part.xml", b"<a>", b"", 64, declared_size=10)]), limits)
    split = write_zip(tmp_path / "split.zip", [Member(f"p{i}.xml", b"<a>", b"</a>", 1) for i in range(4)])
    with pytest.raises(ArchiveRefused, match=r"its parts inflate past the 3 MiB per-file cap \(VERISCALE_ZIP_FILE_MB\)"):
        checked_zip(split, ZipLimits(member_bytes=2 * MIB, file_bytes=3 * MIB))
    many = tmp_path / "many.docx"
    with zipfile.ZipFile(many, "w") as archive:
        for i in range(21):
            archive.writestr(f"e{i}", "")
    view = render_view(many, limits=ZipLimits(members=20))
    assert view.refused and "21 entries, over the 20-entry cap (VERISCALE_ZIP_MEMBERS)" in view.error


def test_pdf_flate_streams_are_counted_whatever_their_length_says(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "paper.pdf", 3)
    limits = ZipLimits(member_bytes=2 * MIB)
    with pytest.raises(ArchiveRefused, match=r"inflates past the 2 MiB per-member cap"):
        checked_pdf(pdf, limits)
    assert checked_pdf(pdf, ZipLimits(member_bytes=4 * MIB)) == pdf.read_bytes()
    assert "Hello" in render_view(pdf, limits=ZipLimits(member_bytes=4 * MIB)).text
    data = pdf.read_bytes()
    hidden = re.sub(rb"/Length \d+", b"/Length 10", data, count=1)  # the stream says it is 10 bytes long
    refused = render_view(_write(tmp_path / "hidden.pdf", hidden), limits=limits)
    assert refused.refused and "2 MiB per-member cap" in refused.refused


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_caps_are_settings_with_defaults_and_bad_values_are_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ZipLimits.from_env() == ZipLimits()
    monkeypatch.setenv("VERISCALE_ZIP_MEMBER_MB", "8")
    monkeypatch.setenv("VERISCALE_VIEW_TIMEOUT_S", "2.5")
    assert ZipLimits.from_env().member_bytes == 8 * MIB and ZipLimits.from_env().view_seconds == 2.5
    monkeypatch.setenv("VERISCALE_ZIP_FILE_MB", "lots")
    with pytest.raises(UserError, match=r"^\$VERISCALE_ZIP_FILE_MB = 'lots' is not a positive number of MiB: fix it"):
        ZipLimits.from_env()


def test_rollout_zip_is_counted_while_unpacked(tmp_path: Path) -> None:
    lying = write_zip(tmp_path / "run.zip", [Member("out.bin", b"", b"", 64, declared_size=2 * MIB)])
    with pytest.raises(UserError, match=r"unpacks past the 4194304-byte cap \(member 'out.bin'\)"):
        extract_zip(lying, tmp_path / "a", max_bytes=4 * MIB)
    assert (tmp_path / "a" / "out.bin").stat().st_size <= 4 * MIB  # stopped at the cap, not the real end
    honest = write_zip(tmp_path / "big.zip", [Member("a.bin", b"", b"", 3), Member("b.bin", b"", b"", 3)])
    with pytest.raises(UserError, match=r"unpacks to 6291456 bytes, over the 4194304-byte cap"):
        extract_zip(honest, tmp_path / "b", max_bytes=4 * MIB)
    many = tmp_path / "many.zip"
    with zipfile.ZipFile(many, "w") as archive:
        for i in range(11):
            archive.writestr(f"f{i}.txt", "")
    with pytest.raises(UserError, match=r"holds 11 entries, over the 10-entry cap \(VERISCALE_ZIP_MEMBERS\)"):
        extract_zip(many, tmp_path / "c", limits=ZipLimits(members=10))


def _many_pages_pdf(pages: int) -> bytes:
    """A pdf of ``pages`` pages sharing one small content stream: slow to extract, small in memory."""
    content = b"BT /F1 12 Tf 72 720 Td (p) Tj ET"
    kids = " ".join(f"{5 + i} 0 R" for i in range(pages)).encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
               b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
                b"/Resources << /Font << /F1 4 0 R >> >> >>"] * pages
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_a_view_over_its_time_cap_is_killed_and_reported_and_the_next_file_is_viewed(tmp_path: Path) -> None:
    slow = _write(tmp_path / "slow.pdf", _many_pages_pdf(40_000))  # about 20 s of text extraction
    good = _small_pptx(tmp_path / "good.pptx", "Margin 18.1%")
    with ViewWorker(ZipLimits(view_seconds=1.5)) as worker:
        view = worker.render(slow)
        after = worker.render(good)
    assert view.refused and view.error == ("slow.pdf was not viewed: reading it took longer than the 1.5-second cap "
                                           "(VERISCALE_VIEW_TIMEOUT_S); raise that setting if the file is trusted")
    assert after.error is None and after.text.splitlines() == ["--- slide 1 ---", "Margin 18.1%"]


def test_the_view_worker_renders_what_render_view_renders(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "small.pdf", 0, text="Total 42")
    with ViewWorker() as worker:
        assert worker.render(pdf) == render_view(pdf)


def test_a_bounded_reader_hands_the_library_the_bytes_it_checked(tmp_path: Path) -> None:
    pptx = _small_pptx(tmp_path / "deck.pptx", "Checked")
    data = checked_zip(pptx, ZipLimits())
    pptx.write_bytes(b"replaced after the check")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert b"Checked" in archive.read("ppt/slides/slide1.xml")


def test_an_inspect_eval_log_with_a_lying_member_is_refused_in_one_sentence(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "log.eval", [
        Member("header.json", b"", stored=b'{"eval": {"task": "t", "model": "m"}}'),
        Member("samples/1_epoch_1.json", b'{"id": 1, "input": "', b'"}', BOMB_MIB, declared_size=24)])
    with pytest.raises(UserError) as caught:
        load_file(path)
    message = str(caught.value)
    assert message == (f"'{path}' was not opened: its part 'samples/1_epoch_1.json' inflates past the 32 MiB "
                       "per-member cap (VERISCALE_ZIP_MEMBER_MB); raise that setting if the file is trusted")


SCRIPT_DRIVER = """
import json, resource, runpy, sys
def peak_mib():  # this process's own peak (VmHWM: per address space, so not the forking parent's ru_maxrss)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
script, target = sys.argv[1], sys.argv[2]
sys.argv = [script, target]
try:
    runpy.run_path(script, run_name="__main__")
    code = 0
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "peak_mib": peak_mib()}))
"""
SKILLS = Path(__file__).resolve().parents[2] / "src" / "veriscale" / "harness" / "skills"


@pytest.mark.parametrize("script, bomb", [
    ("evidence-xlsx/scripts/xlsx_dump.py", "model.xlsx"), ("evidence-xlsx/scripts/xlsx_recalc.py", "model.xlsx"),
    ("repair-workbook/scripts/xlsx_set_cells.py", "model.xlsx"), ("evidence-docx/scripts/docx_dump.py", "forged.docx"),
    ("evidence-pdf/scripts/pdf_text.py", "paper.pdf")])
def test_skill_scripts_run_on_the_host_refuse_a_bomb_in_one_line(bomb_source: Path, script: str, bomb: str) -> None:
    target = bomb_source / "rollouts" / "bombs" / bomb
    argv = [sys.executable, "-c", SCRIPT_DRIVER, str(SKILLS / script), str(target)]
    if script.endswith("xlsx_set_cells.py"):
        argv = [sys.executable, "-c", SCRIPT_DRIVER.replace("[script, target]", "[script, target, target + '.out', '--set', 'S!A1=1']"),
                str(SKILLS / script), str(target)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 2 and result["peak_mib"] < PEAK_CAP_MIB, (result, done.stderr[-2000:])
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: '{target}' was not opened: its ") and line.endswith(
        "inflates past the 32 MiB per-member cap (VERISCALE_ZIP_MEMBER_MB); raise that setting if the file is trusted")


def test_a_view_that_swells_within_the_inflation_caps_fails_in_the_worker_not_the_host(tmp_path: Path) -> None:
    """30 MiB of honest paragraphs pass the inflation caps, but python-docx's tree of them needs
    about 250 MiB: with 64 MiB of room the worker's reader fails, and says so."""
    paragraph = b"<w:p><w:r><w:t>Revenue 570000</w:t></w:r></w:p>"
    body = paragraph * (30 * MIB // len(paragraph))
    path = tmp_path / "long.docx"
    document = docx.Document()
    document.add_paragraph("placeholder")
    document.save(path)
    _with_part_replaced(path, Member("word/document.xml", b"", stored=DOCX_HEAD.split(b"<w:p>")[0] + body + b"</w:body></w:document>"))
    assert render_view(path, max_chars=100).error is None  # readable with room to spare
    good = _small_pptx(tmp_path / "good.pptx", "Margin 18.1%")
    with ViewWorker(ZipLimits(view_memory_bytes=64 * MIB), max_chars=100) as worker:
        view = worker.render(path)
        after = worker.render(good)
    assert view.error and view.text.startswith(("[could not be read: long.docx:", "[long.docx was not viewed:")), view
    assert after.error is None and "Margin 18.1%" in after.text
