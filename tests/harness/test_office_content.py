"""Deliverables and rollouts are data (issue 30, round three, finding 1): an office file that makes
its reader open another file is refused by the delivery gate, by the grading stage of `harness
score`, by `materialize`, and by the shipped example grader itself.

The attack: a 7 KB workbook whose cells are references into the answer key on the host
(`=[1]Summary!B1` with an `xl/externalLinks` part, or the key's path written in each formula)
scored 1.0 (36/36) under `harness score --delivered` with `examples/grader/grade.py`, because the
`formulas` library opened the referenced workbook from the host disk."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import openpyxl
import pytest
import typer
from typer.testing import CliRunner

from tests.harness import office_attacks as attacks
from veriscale.cli.harness import register
from veriscale.harness.protocol.gate import keep_base_files
from veriscale.harness.scoring.score import GraderCommand, ScoreItem, explicit_delivery, score_deliveries
from veriscale.harness.workspace.materialize import materialize
from veriscale.harness.workspace.office_content import external_formula_reason, office_refusal

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_GRADER = REPO / "examples" / "grader" / "grade.py"
KEY_NAME = "golden.xlsx"


def _cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    app.callback()(lambda: None)
    return app


def _grader_text(fixture_root: Path) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE_GRADER))} --references {shlex.quote(str(fixture_root))}"


def _staged_folder() -> Path:
    """Where `harness score` stages the revised delivery for the grader (the random part is one name)."""
    return Path(tempfile.gettempdir()).resolve() / "veriscale-grade-xxxxxxxx" / "revised" / "deliverables"


def _attack(folder: Path, key: Path, variant: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if variant == "external-link-part":
        return attacks.linked_workbook(folder / "model.xlsx", key)
    return attacks.linked_workbook(folder / "model.xlsx", key, link_part=False, seen_from=_staged_folder())


VARIANTS = ("external-link-part", "path-in-formula")


@pytest.mark.parametrize("variant", VARIANTS)
def test_harness_score_delivered_grades_the_attack_workbook_like_an_empty_one(
        materialized: dict, fixture_root: Path, tmp_path: Path, variant: str) -> None:
    task = materialized["finance_workbook"]["dir"]
    key = fixture_root / "finance_workbook" / KEY_NAME
    attack = _attack(tmp_path / "attack" / "deliverables", key, variant)
    assert attack.stat().st_size < 10_000  # the finding's "7 KB workbook"
    empty = tmp_path / "empty" / "deliverables"
    empty.mkdir(parents=True)
    openpyxl.Workbook().save(empty / "model.xlsx")

    scores = {}
    for name, folder in (("attack", attack.parent), ("empty", empty)):
        result = CliRunner().invoke(_cli(), ["harness", "score", str(task), "--delivered", str(folder), "--base", "none",
                                             "--grader", _grader_text(fixture_root), "--json", "--tolerance", "1"])
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.stdout)["tasks"]
        scores[name] = row
    assert scores["empty"]["revised"] == 0.0
    assert scores["attack"]["revised"] == scores["empty"]["revised"] == 0.0  # was 1.0 (36/36)
    assert scores["attack"]["grades"]["revised"]["extra"]["note"] == "no .xlsx delivered"
    note = " ".join(scores["attack"]["notes"])
    assert "left out of grading (delivered): model.xlsx was refused: " in note
    assert "another workbook" in note


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_example_grader_refuses_external_references_itself(fixture_root: Path, tmp_path: Path, variant: str) -> None:
    key = fixture_root / "finance_workbook" / KEY_NAME
    folder = tmp_path / "deliverables"
    folder.mkdir()
    if variant == "external-link-part":
        attacks.linked_workbook(folder / "model.xlsx", key)
    else:
        attacks.linked_workbook(folder / "model.xlsx", key, link_part=False, seen_from=folder)
    done = subprocess.run([sys.executable, str(EXAMPLE_GRADER), "--references", str(fixture_root),
                           "--task", str(tmp_path / "finance_workbook"), "--deliverables", str(folder)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["score"] == 0.0 and result["passed"] == 0 and result["checks"] == 36, result
    assert result["note"].startswith("model.xlsx refused: ") and "another workbook" in result["note"], result
    assert "model.xlsx refused: " in done.stderr


def test_the_example_grader_lets_formulas_open_the_delivered_workbook_only(fixture_root: Path, tmp_path: Path) -> None:
    """Its second line: with the content check skipped, `formulas` is still refused the answer key."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("example_grade", EXAMPLE_GRADER)
    grade = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grade)
    key = fixture_root / "finance_workbook" / KEY_NAME
    sheets = ["Revenue", "Costs", "Margin", "Summary"]
    for link_part in (True, False):
        book = attacks.linked_workbook(tmp_path / f"model-{link_part}.xlsx", key, link_part=link_part)
        assert grade.recomputed_cells(book, sheets) == {}  # every reference into the key reads #REF!
    honest = tmp_path / "honest.xlsx"
    shutil.copyfile(key, honest)
    assert len(grade.recomputed_cells(honest, sheets)) == 36


def test_the_example_grader_still_recomputes_an_honest_workbook(materialized: dict, fixture_root: Path,
                                                                tmp_path: Path) -> None:
    """A workbook saved without values (formulas only, across its own sheets) is recomputed as before."""
    key = fixture_root / "finance_workbook" / KEY_NAME
    folder = tmp_path / "deliverables"
    folder.mkdir()
    shutil.copyfile(key, folder / "model.xlsx")  # golden itself, formulas without saved values
    done = subprocess.run([sys.executable, str(EXAMPLE_GRADER), "--references", str(fixture_root),
                           "--task", str(tmp_path / "finance_workbook"), "--deliverables", str(folder)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["score"] == 1.0


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_delivery_gate_refuses_the_attack_and_restores_the_base_file(fixture_root: Path, tmp_path: Path,
                                                                         variant: str) -> None:
    key = fixture_root / "finance_workbook" / KEY_NAME
    base = tmp_path / "base"
    base.mkdir()
    attacks.formula_workbook(base / "model.xlsx")
    out = tmp_path / "out"
    _attack(out, key, variant)
    attack_bytes = (out / "model.xlsx").read_bytes()
    report = keep_base_files(base, out)
    (refused,) = report["refused"]
    assert refused["path"] == "model.xlsx"
    assert refused["reason"].startswith("model.xlsx was refused: ") and "another workbook" in refused["reason"]
    assert (out / "model.xlsx").read_bytes() == (base / "model.xlsx").read_bytes() != attack_bytes
    assert report["restored"] == ["model.xlsx"]

    rebuilt = tmp_path / "rebuilt"  # no base (a rebuild): the file is removed, not replaced
    _attack(rebuilt, key, variant)
    report = keep_base_files(None, rebuilt)
    assert [r["path"] for r in report["refused"]] == ["model.xlsx"] and not (rebuilt / "model.xlsx").exists()


def test_the_gate_refuses_by_content_not_by_name(fixture_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    attacks.linked_workbook(out / "numbers.dat", fixture_root / "finance_workbook" / KEY_NAME)
    (out / "data.zip").write_bytes(_plain_zip())
    report = keep_base_files(None, out)
    assert [r["path"] for r in report["refused"]] == ["numbers.dat"]
    assert (out / "data.zip").is_file()  # a plain zip (no [Content_Types].xml) is data: kept, never unpacked


def _plain_zip() -> bytes:
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes.txt", "=[1]Summary!B1\n")
    return buffer.getvalue()


@pytest.mark.parametrize("variant", VARIANTS)
def test_materialize_leaves_the_attack_out_and_names_the_file(fixture_root: Path, tmp_path: Path, variant: str) -> None:
    source = tmp_path / "src"
    (source / "rollouts" / "run-a").mkdir(parents=True)
    (source / "rollouts" / "run-b").mkdir(parents=True)
    (source / "task.md").write_text("Build the model.\n")
    _attack(source / "rollouts" / "run-a", fixture_root / "finance_workbook" / KEY_NAME, variant)
    (source / "rollouts" / "run-a" / "notes.md").write_text("Revenue: 570000\n")
    attacks.formula_workbook(source / "rollouts" / "run-b" / "model.xlsx")
    attacks.hyperlink_docx(source / "rollouts" / "run-b" / "report.docx")
    report = materialize(source, tmp_path / "task", seed=1)
    refused = [(path, reason) for path, reason in report.left_out if "was refused" in reason]
    assert len(refused) == 1, report.left_out
    path, reason = refused[0]
    assert path == "rollouts/run-a/model.xlsx"
    assert reason.startswith("rollouts/run-a/model.xlsx was refused: ") and "another workbook" in reason
    assert reason in report.warnings
    kept = {p.relative_to(tmp_path / "task").as_posix() for p in (tmp_path / "task").rglob("*") if p.is_file()}
    label = {v: k for k, v in report.label_map.items()}
    assert f"rollouts/{label['run-a']}/deliverables/model.xlsx" not in kept
    assert f"rollouts/{label['run-a']}/deliverables/notes.md" in kept
    for name in ("model.xlsx", "report.docx"):  # the honest files stay, with their views
        assert f"rollouts/{label['run-b']}/deliverables/{name}" in kept
        assert f"rollouts/{label['run-b']}/deliverables/{name}.view.txt" in kept


def test_honest_files_pass_the_gate_the_grading_stage_and_materialize(materialized: dict, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    attacks.formula_workbook(out / "model.xlsx")
    attacks.hyperlink_docx(out / "report.docx")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    report = keep_base_files(None, out)
    assert report["refused"] == [] and {p.name: p.read_bytes() for p in out.iterdir()} == before
    with zipfile.ZipFile(out / "report.docx") as archive:  # the hyperlink really is an external relationship
        rels = archive.read("word/_rels/document.xml.rels").decode()
    assert 'TargetMode="External"' in rels and "hyperlink" in rels

    seen = tmp_path / "seen.py"
    seen.write_text("import argparse, json, pathlib\np = argparse.ArgumentParser(); p.add_argument('--task');"
                    " p.add_argument('--deliverables'); a = p.parse_args()\n"
                    "print(json.dumps({'score': 1.0, 'seen': sorted(x.name for x in pathlib.Path(a.deliverables).iterdir())}))\n")
    grader = GraderCommand.parse(f"{shlex.quote(sys.executable)} {shlex.quote(str(seen))}")
    task = materialized["finance_workbook"]["dir"]
    scored = score_deliveries([ScoreItem(task, explicit_delivery(out, "none"))], grader=grader, run_preflight=False)
    (row,) = scored.tasks
    assert row.grades["revised"]["extra"]["seen"] == ["model.xlsx", "report.docx"] and not row.notes
    # the fixture tasks' own workbooks and reports materialised whole
    for built in materialized.values():
        assert not [p for p, reason in built["report"].left_out if "was refused" in reason]


def test_a_dtd_in_an_xlsx_part_is_refused(tmp_path: Path) -> None:
    book = attacks.with_doctype(attacks.formula_workbook(tmp_path / "model.xlsx"), "xl/worksheets/sheet1.xml")
    refusal = office_refusal(book.read_bytes(), "model.xlsx")
    assert refusal is not None and refusal.checked
    assert refusal.sentence.startswith("model.xlsx was refused: its part 'xl/worksheets/sheet1.xml' declares a DTD")
    out = tmp_path / "out"
    out.mkdir()
    shutil.copyfile(book, out / "model.xlsx")
    report = keep_base_files(None, out)
    assert [r["path"] for r in report["refused"]] == ["model.xlsx"] and "DTD" in report["refused"][0]["reason"]
    types = attacks.with_doctype(attacks.formula_workbook(tmp_path / "types.xlsx"), "[Content_Types].xml")
    assert "declares a DTD" in office_refusal(types.read_bytes(), "types.xlsx").sentence


def test_external_targets_a_reader_opens_are_refused_and_hyperlinks_kept(tmp_path: Path) -> None:
    template = attacks.attached_template_docx(tmp_path / "t.docx", "file:///root/answers.dotm")
    refusal = office_refusal(template.read_bytes(), "t.docx")
    assert refusal is not None and "external relationship of type 'attachedTemplate'" in refusal.sentence
    assert office_refusal(attacks.hyperlink_docx(tmp_path / "h.docx").read_bytes(), "h.docx") is None
    include = attacks.field_docx(tmp_path / "i.docx", 'INCLUDETEXT "C:\\keys\\solution.docx"')
    assert "holds the field 'INCLUDETEXT" in office_refusal(include.read_bytes(), "i.docx").sentence
    page = attacks.field_docx(tmp_path / "p.docx", " PAGE ")
    assert office_refusal(page.read_bytes(), "p.docx") is None


@pytest.mark.parametrize("formula, reason", [
    ("=[1]Summary!B1", "another workbook"),
    ("='[1]Sheet one'!B1", "another workbook"),
    ("=[1]!Revenue", "another workbook"),
    ("='../keys/[golden.xlsx]Summary'!B1", "another workbook"),
    ("='C:\\keys\\[golden.xlsx]Summary'!B1", "another workbook"),
    ("='C:\\keys\\golden.xlsx'!Revenue", "another workbook"),
    ("=SUM([golden.xlsx]Revenue!B2:B5)", "another workbook"),
    ("=INDIRECT(\"'../[gold\"&\"en.xlsx]Revenue'!B2\")", "another workbook"),  # formulas opens this path
    ("=cmd|' /C calc'!A0", "DDE"),
    ("=_xlfn.WEBSERVICE(\"http://169.254.169.254/\")", "WEBSERVICE"),
])
def test_formulas_into_other_workbooks_are_found(formula: str, reason: str) -> None:
    assert reason in (external_formula_reason(formula) or "")


@pytest.mark.parametrize("formula", [
    "=SUM(B2:B5)", "=Revenue!B6", "='Q1 figures'!B6/4", "=SUM(Table1[Amount])", "=Table1[[#This Row],[Amount]]",
    "=\"a|b\"&A1", "=IF(A1>0,\"up\",\"down\")", "=INDIRECT(\"Revenue!B2\")",
])
def test_formulas_within_the_workbook_pass(formula: str) -> None:
    assert external_formula_reason(formula) is None


def test_a_damaged_or_oversized_office_file_is_refused_as_unchecked(tmp_path: Path) -> None:
    from veriscale.harness.workspace.zip_limits import ZipLimits

    book = attacks.formula_workbook(tmp_path / "model.xlsx")
    refusal = office_refusal(book.read_bytes(), "model.xlsx", ZipLimits(members=3))
    assert refusal is not None and not refusal.checked
    assert refusal.sentence.startswith("model.xlsx was refused: it could not be checked for links to other files, since ")
    assert "VERISCALE_ZIP_MEMBERS" in refusal.sentence
    broken = attacks.replace_part(tmp_path / "broken.xlsx", book, "xl/workbook.xml", b"<workbook><sheets>")
    assert "its part 'xl/workbook.xml' is not well-formed XML" in office_refusal(broken.read_bytes(), "broken.xlsx").sentence
