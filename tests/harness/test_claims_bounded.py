"""Claim extraction and grading stay bounded on hostile deliverables (issue 30, item 1).

Claims are read in a capped child (``claims/extract_worker``) with a budget of claims and bytes;
the grader runs under a memory cap; the example grader refuses ranges too large to recompute.
No test asserts seconds: each checks what came back (a warning naming the file and the cap, a
claim count at the budget, a small claims.json, a refusal sentence).
"""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from veriscale.harness.claims.claim_map import build_claim_map
from veriscale.harness.claims.report import write_claim_map
from veriscale.harness.claims.extract import (
    MAX_FILE_CLAIMS,
    MAX_ROLLOUT_CLAIM_BYTES,
    Claim,
    choose_key_column,
)
from veriscale.harness.claims.extract_worker import _take, extract_claims
from veriscale.harness.scoring.grader import GraderCommand, GraderFailure
from veriscale.harness.workspace.zip_limits import ZipLimits

REPO = Path(__file__).resolve().parents[2]
_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG = "http://schemas.openxmlformats.org/package/2006/relationships"
_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/worksheets/sheet1.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
    '<Override PartName="/xl/sharedStrings.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>'
)


def entity_xlsx(path: Path, entity_bytes: int = 4 << 20, references: int = 99) -> Path:
    """A ~9 KB xlsx whose shared strings reference one 4 MiB entity 99 times (396 MiB once expanded)."""
    strings = "<si><t>&big;</t></si>" * references
    shared = (f'<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE sst [<!ENTITY big "{"A" * entity_bytes}">]>'
              f'<sst xmlns="{_MAIN}" count="{references}" uniqueCount="{references}">{strings}</sst>')
    rows = "".join(f'<row r="{i + 1}"><c r="A{i + 1}" t="s"><v>{i}</v></c></row>' for i in range(references))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", f'<?xml version="1.0"?><Relationships xmlns="{_PKG}"><Relationship Id="rId1" '
                         f'Type="{_REL}/officeDocument" Target="xl/workbook.xml"/></Relationships>')
        archive.writestr("xl/workbook.xml", f'<?xml version="1.0"?><workbook xmlns="{_MAIN}" xmlns:r="{_REL}"><sheets>'
                         '<sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>')
        archive.writestr("xl/_rels/workbook.xml.rels", f'<?xml version="1.0"?><Relationships xmlns="{_PKG}">'
                         f'<Relationship Id="rId1" Type="{_REL}/worksheet" Target="worksheets/sheet1.xml"/>'
                         f'<Relationship Id="rId2" Type="{_REL}/sharedStrings" Target="sharedStrings.xml"/>'
                         '</Relationships>')
        archive.writestr("xl/worksheets/sheet1.xml", f'<?xml version="1.0"?><worksheet xmlns="{_MAIN}"><sheetData>'
                         f'{rows}</sheetData></worksheet>')
        archive.writestr("xl/sharedStrings.xml", shared)
    return path


def wide_csv(path: Path, columns: int = 230_000) -> Path:
    """A 2 MiB csv: one header of 230,000 columns and one row (before: over 600 s choosing its key)."""
    path.write_text(",".join(f"c{i}" for i in range(columns)) + "\n" + ",".join("1" for _ in range(columns)) + "\n")
    return path


def _task(root: Path, make: dict) -> Path:
    (root / "spec").mkdir(parents=True)
    (root / "spec" / "task.md").write_text("Build the model.\n")
    for label in ("r01", "r02"):
        deliverables = root / "rollouts" / label / "deliverables"
        deliverables.mkdir(parents=True)
        (deliverables / "notes.md").write_text("Revenue was 570000.\n")
        for name, build in make.items():
            build(deliverables / name)
    return root


def test_an_entity_expansion_xlsx_is_refused_unread_and_the_claims_stay_small(tmp_path: Path) -> None:
    xlsx = entity_xlsx(tmp_path / "model.xlsx")
    assert xlsx.stat().st_size < 16_000
    task = _task(tmp_path / "t", {"model.xlsx": lambda path: path.write_bytes(xlsx.read_bytes())})
    claim_map = build_claim_map(task)
    refused = [w for w in claim_map.warnings if "model.xlsx was not opened" in w]
    assert len(refused) == 2, claim_map.warnings
    assert "declares a DTD" in refused[0] and "only its presence is compared" in refused[0]
    keys = {record.key for record in claim_map.claims}
    assert keys == {"model.xlsx:(file)", "notes.md:(file)", "notes.md:revenue"}
    paths = write_claim_map(claim_map, tmp_path / "out")
    # before: 830 MB of claims.json (every expanded string a claim value)
    assert paths["claims"].stat().st_size < 20_000


def test_a_2mb_csv_finishes_within_the_childs_cap_with_its_claims_capped(tmp_path: Path) -> None:
    csv = wide_csv(tmp_path / "data.csv")
    assert csv.stat().st_size > 2 << 20
    claims, warnings = extract_claims({"r01": {"data.csv": csv}, "r02": {"data.csv": csv}})
    assert not [w for w in warnings if "was not read for claims" in w], warnings  # no cap hit: it finished
    stopped = [w for w in warnings if w.startswith("claims from r01/data.csv stopped at 20,000:")]
    assert len(stopped) == 1 and "at most 20,000 claims are taken from one file" in stopped[0], warnings
    for label in ("r01", "r02"):
        kinds = [claim.kind for claim in claims[label]]
        assert kinds.count("csv_cell") == MAX_FILE_CLAIMS - 1  # row_count is one of the 20,000
        assert kinds.count("csv_rows") == 1 and kinds.count("file") == 1


def test_the_key_column_is_chosen_in_linear_time_and_as_before() -> None:
    header = [f"c{i}" for i in range(200_000)] + ["id"]
    version = (header, [["1"] * 200_001])
    assert choose_key_column([version, version]) == "id"  # every column unique: the id-like name wins
    duplicated = (["name", "id", "id"], [["a", "1", "x"], ["b", "1", "y"]])
    assert choose_key_column([duplicated]) == "name"  # a repeated name counts at its first position
    assert choose_key_column([(["x"], [["1"], ["1"]])]) is None


def test_a_file_the_child_cannot_finish_is_a_warning_naming_it_and_the_cap(tmp_path: Path) -> None:
    stuck = tmp_path / "stuck.md"
    os.mkfifo(stuck)  # reading it never ends: no writer ever opens it
    notes = tmp_path / "notes.md"
    notes.write_text("Revenue was 570000.\n")
    claims, warnings = extract_claims({"r01": {"stuck.md": stuck, "notes.md": notes}}, ZipLimits(view_seconds=2.0))
    assert warnings == ["r01/stuck.md was not read for claims (reading it took longer than the 2-second cap "
                        "(VERISCALE_VIEW_TIMEOUT_S); raise that setting if the file is trusted); only its presence "
                        "is compared"]
    keys = {claim.key for claim in claims["r01"]}
    assert keys == {"stuck.md:(file)", "notes.md:(file)", "notes.md:revenue"}  # the next file in a fresh child


def test_a_file_over_the_memory_cap_is_a_warning_naming_it_and_the_cap(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"rows": [[i, str(i)] for i in range(300_000)]}))
    claims, warnings = extract_claims({"r01": {"big.json": big}}, ZipLimits(view_memory_bytes=8 << 20))
    assert warnings == ["r01/big.json was not read for claims (reading it ran out of the 8 MiB view-memory cap "
                        "(VERISCALE_VIEW_MEMORY_MB); raise that setting if the file is trusted); only its presence "
                        "is compared"]
    assert [claim.key for claim in claims["r01"]] == ["big.json:(file)"]


def test_the_bytes_budget_stops_a_file_with_a_note() -> None:
    claims = (Claim(f"f.md:label {i}", "text_number", "f.md", f"label {i}", "f.md", "x" * 1000) for i in range(10**9))
    parts, used, note = _take("r01/f.md", claims, max_claims=10**6, max_bytes=50_000)
    assert 40 <= len(parts) < 50 and used <= 50_000
    assert note == (f"claims from r01/f.md stopped at {len(parts)}: the rollout's budget of "
                    f"{MAX_ROLLOUT_CLAIM_BYTES >> 20} MiB of claim text was spent, so the file's rest was not read")


# --- grading -------------------------------------------------------------------------------------


def test_the_example_grader_refuses_a_range_too_large_to_recompute(tmp_path: Path) -> None:
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    book.active.title = "Summary"
    book.active["A2"] = 1
    book.active["B1"] = "=SUM(A2:CV20000)"  # saved without a value: the grader would recompute it
    deliverables = tmp_path / "deliverables"
    deliverables.mkdir()
    book.save(deliverables / "model.xlsx")
    task = tmp_path / "finance_workbook"
    task.mkdir()
    grader = GraderCommand.parse(f"{sys.executable} {REPO / 'examples' / 'grader' / 'grade.py'} "
                                 f"--references {REPO / 'tests' / 'fixtures' / 'harness'}")
    grade = grader.grade(task, deliverables)
    assert grade.score == 0.0
    # before: 276 s and 3.4 GB in `formulas`
    assert grade.extra["note"] == ("model.xlsx refused: its formula in Summary!B1 spans 1,999,900 cells (A2:CV20000), "
                                   "more than the 100,000 this grader recomputes in one range")


def test_a_grader_over_its_memory_cap_fails_in_one_sentence(tmp_path: Path) -> None:
    grader = GraderCommand.parse(f"{sys.executable} -c 'bytearray(4 << 30)'", memory_mb=512)
    with pytest.raises(GraderFailure) as failure:
        grader.grade(tmp_path, tmp_path)
    assert str(failure.value).startswith("ran out of its 512 MiB memory cap (exit status 1: MemoryError")
