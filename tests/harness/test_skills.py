"""The skill library: staging by phase, applies-to filtering, user overrides, frontmatter errors,
and the shipped scripts doing real work on real files."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import openpyxl
import pytest
import typer
from typer.testing import CliRunner

from veriscale.cli.harness import register
from veriscale.errors import UserError
from veriscale.harness.skills.library import (
    BUILTIN_SKILLS_DIR, SESSION_STAGES, STAGES, all_skills, load_skills, parse_frontmatter, skill_index,
)

SCRIPTS = sorted(BUILTIN_SKILLS_DIR.glob("*/scripts/*.py"))


def script(skill: str, name: str) -> Path:
    return BUILTIN_SKILLS_DIR / skill / "scripts" / name


def run_script(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=120)


def write_skill(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder / "SKILL.md"


# --- loading and staging -----------------------------------------------------------------------


def test_every_shipped_skill_is_valid_and_every_phase_is_covered() -> None:
    skills = all_skills()
    assert {s.phase for s in skills.values()} == set(STAGES)
    for kind in ("workbook", "report", "patch"):
        for phase in ("resolve", "falsify", "repair"):
            assert f"{phase}-{kind}" in skills
    for fmt in ("xlsx", "docx", "pdf", "table", "text"):
        assert f"evidence-{fmt}" in skills
    for skill in skills.values():
        assert skill.folder.name == skill.name and skill.body.strip() and skill.description


@pytest.mark.parametrize("phase", sorted(SESSION_STAGES))
def test_sessions_get_only_their_stages(phase: str) -> None:
    names = [s.name for s in load_skills(phase)]
    allowed = SESSION_STAGES[phase]
    assert names and all(n.split("-", 1)[0] in allowed for n in names)
    assert {n.split("-", 1)[0] for n in names} == set(allowed)


def test_adjudication_gets_evidence_only_and_aliases_map_to_sessions() -> None:
    assert {s.phase for s in load_skills("adjudication")} == {"evidence"}
    assert [s.name for s in load_skills("falsify")] == [s.name for s in load_skills("challenger")]
    with pytest.raises(UserError, match="unknown phase 'judge'"):
        load_skills("judge")


def test_applies_to_filters_by_deliverable_names() -> None:
    for_report = {s.name for s in load_skills("resolver", files=["out/report.md"])}
    assert "resolve-report" in for_report and "evidence-text" in for_report
    assert "evidence-xlsx" not in for_report and "resolve-workbook" not in for_report
    for_book = {s.name for s in load_skills("delivery", files=["MODEL.XLSX"])}
    assert {"evidence-xlsx", "repair-workbook"} <= for_book and "repair-report" not in for_book
    assert {s.name for s in load_skills("delivery", files=[])} == {"evidence-text"}


def test_user_folder_adds_and_replaces_builtins(tmp_path: Path) -> None:
    write_skill(tmp_path, "evidence-xlsx", "---\nname: evidence-xlsx\ndescription: my own\nphase: evidence\n"
                "applies-to:\n  - '*.xlsx'\n---\nUse my tool.\n")
    write_skill(tmp_path, "falsify-units", "---\nname: falsify-units\ndescription: units\nphase: falsify\n---\nCheck units.\n")
    skills = {s.name: s for s in load_skills("challenger", dirs=[tmp_path])}
    assert skills["evidence-xlsx"].description == "my own"
    assert skills["evidence-xlsx"].path == tmp_path / "evidence-xlsx" / "SKILL.md"
    assert skills["evidence-xlsx"].scripts == ()
    assert skills["falsify-units"].applies_to == ("*",)
    assert "falsify-units" not in {s.name for s in load_skills("adjudication", dirs=[tmp_path])}
    assert "read: /skills/falsify-units/SKILL.md" in skill_index([skills["falsify-units"]], root=Path("/skills"))


@pytest.mark.parametrize("text, message", [
    ("name: evidence-x\n", "does not start with a '---'"),
    ("---\nname: evidence-x\ndescription: d\nphase: evidence\n", "no closing '---'"),
    ("---\ndescription: d\nphase: evidence\n---\nbody\n", "needs a non-empty 'name:'"),
    ("---\nname: evidence-x\ndescription: d\nphase: review\n---\nbody\n", "phase 'review'"),
    ("---\nname: evidence-x\ndescription: d\nphase: evidence\ncolour: red\n---\nbody\n", "unknown key"),
    ("---\nname: evidence-x\ndescription: d\nphase: evidence\njust words\n---\nbody\n", "not 'key: value'"),
    ("---\nname: evidence-x\ndescription: d\nphase: evidence\napplies-to: [*.csv\n---\nbody\n", "not closed"),
    ("---\nname: evidence-x\ndescription: d\nphase: evidence\n---\n\n", "has no body"),
    ("---\nname: resolve-x\ndescription: d\nphase: evidence\n---\nbody\n", "must be 'evidence-<something>'"),
])
def test_bad_frontmatter_is_a_user_error_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    skill_file = write_skill(tmp_path, "evidence-x", text)
    with pytest.raises(UserError, match=re.escape(message)) as caught:
        load_skills("resolver", dirs=[tmp_path])
    assert str(skill_file) in str(caught.value)


def test_folder_name_must_match_and_missing_folder_is_reported(tmp_path: Path) -> None:
    write_skill(tmp_path, "evidence-y", "---\nname: evidence-x\ndescription: d\nphase: evidence\n---\nbody\n")
    with pytest.raises(UserError, match="sits in folder 'evidence-y'"):
        all_skills([tmp_path])
    with pytest.raises(UserError, match="does not exist"):
        all_skills([tmp_path / "nope"])


def test_frontmatter_lists_inline_and_block() -> None:
    fields, body = parse_frontmatter(
        "---\nname: a\napplies-to: [\"*.xlsx\", '*.csv']\nother:\n  - x\n  - 'y z'\n---\nText\n", Path("S.md"))
    assert fields["applies-to"] == ["*.xlsx", "*.csv"] and fields["other"] == ["x", "y z"] and body == "Text\n"


def test_cli_lists_skills_for_a_phase_as_json() -> None:
    app = typer.Typer()
    register(app)
    app.callback()(lambda: None)
    result = CliRunner().invoke(app, ["harness", "skills", "list", "--phase", "adjudication", "--json"])
    assert result.exit_code == 0, result.output
    assert {s["phase"] for s in json.loads(result.stdout)} == {"evidence"}
    bad = CliRunner().invoke(app, ["harness", "skills", "list", "--phase", "judge"])
    assert bad.exit_code == 2 and "unknown phase" in bad.output


# --- scripts -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_script_runs_help(path: Path) -> None:
    result = run_script(path, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


def workbook_with_cached(path: Path, cells: dict[str, object], cached: dict[str, object]) -> None:
    """Save with openpyxl, then write cached results into the sheet XML the way Excel does."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Calc"
    for ref, value in cells.items():
        sheet[ref] = value
    raw = io.BytesIO()
    book.save(raw)
    source = zipfile.ZipFile(io.BytesIO(raw.getvalue()))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "xl/worksheets/sheet1.xml":
                text = data.decode()
                for ref, value in cached.items():
                    text, count = re.subn(rf'(<c r="{ref}"[^>]*><f>[^<]*</f>)<v\s*/?>(?:</v>)?',
                                          rf"\g<1><v>{value}</v>", text)
                    assert count == 1
                data = text.encode()
            out.writestr(info, data)


def test_recalc_finds_a_planted_stale_value_and_write_cache_fixes_it(tmp_path: Path) -> None:
    book = tmp_path / "calc.xlsx"
    workbook_with_cached(book, {"A1": 10, "A2": 20, "A3": "=A1+A2", "B1": "=A3*2", "B2": "=SUM(A1:A2)/A2"},
                         {"A3": 999, "B1": 60, "B2": 1.5})
    recalc = script("evidence-xlsx", "xlsx_recalc.py")
    fixed = tmp_path / "fixed.xlsx"
    found = run_script(recalc, str(book), "--json", "--write-cache", str(fixed))
    assert found.returncode == 1, found.stderr
    cells = {c["cell"]: c for c in json.loads(found.stdout)["cells"]}
    assert cells["Calc!A3"]["status"] == "mismatch" and cells["Calc!A3"]["recomputed"] == 30
    assert cells["Calc!B1"]["status"] == "ok" and cells["Calc!B2"]["status"] == "ok"
    assert run_script(recalc, str(fixed)).returncode == 0
    values = openpyxl.load_workbook(fixed, data_only=True)["Calc"]
    formulas = openpyxl.load_workbook(fixed)["Calc"]
    assert values["A3"].value == 30 and values["B1"].value == 60
    assert formulas["A3"].value == "=A1+A2"


def test_recalc_reports_formula_cells_without_cached_values(tmp_path: Path) -> None:
    book = tmp_path / "plain.xlsx"
    workbook = openpyxl.Workbook()
    workbook.active["A1"], workbook.active["A2"] = 2, "=A1*3"
    workbook.save(book)
    result = run_script(script("evidence-xlsx", "xlsx_recalc.py"), str(book))
    assert result.returncode == 0 and "no cached value" in result.stdout and "recomputed=6" in result.stdout


def test_xlsx_diff_and_dump_on_fixture_rollouts(fixture_root: Path) -> None:
    runs = fixture_root / "finance_workbook" / "rollouts"
    diff = run_script(script("evidence-xlsx", "xlsx_diff.py"), str(runs / "opus-run-1" / "model.xlsx"),
                      str(runs / "opus-run-2" / "model.xlsx"), "--sheet", "Summary", "--show-formulas")
    assert diff.returncode == 0, diff.stderr
    rows = {line.split("\t")[0]: line for line in diff.stdout.splitlines()}
    assert set(rows) == {"Summary!B4"} and "Costs!B6" in rows["Summary!B4"]
    dump = run_script(script("evidence-xlsx", "xlsx_dump.py"), str(runs / "opus-run-1" / "model.xlsx"),
                      "--sheet", "Summary", "--range", "B6:B6")
    assert dump.stdout.strip() == "Summary!B6\t0.1875\t=B1/480000-1"


def test_table_diff_keys_rows_and_flattens_json(fixture_root: Path) -> None:
    runs = fixture_root / "data_cleanup" / "rollouts"
    tool = script("evidence-table", "table_diff.py")
    rows = run_script(tool, str(runs / "d-run-a" / "customers_clean.csv"), str(runs / "d-run-b" / "customers_clean.csv"),
                      "--key", "customer_id")
    assert "row C007\tpresent in d-run-a; missing in d-run-b" in rows.stdout
    summary = run_script(tool, str(runs / "d-run-a" / "summary.json"), str(runs / "d-run-e" / "summary.json"))
    assert "spend_by_month.2024-01\td-run-a=200.5\td-run-e='<missing>'" in summary.stdout


def test_numbers_in_context_normalises_percentages_and_separators(tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("Growth was 18.1% on revenue of $1,240.5 thousand.\nHeadcount: 212\n")
    result = run_script(script("evidence-text", "numbers_in_context.py"), str(note), "--near", "growth")
    values = [line.split("\t")[2] for line in result.stdout.splitlines()]
    assert values == ["0.181", "1240.5"]


def test_docx_dump_locates_table_cells(fixture_root: Path) -> None:
    result = run_script(script("evidence-docx", "docx_dump.py"),
                        str(fixture_root / "quarterly_report" / "rollouts" / "w2" / "report.docx"))
    assert "P3\t[Normal]\tYear-over-year revenue growth: 16.7%" in result.stdout
    assert "T1.R3.C3\t0.76" in result.stdout


def test_set_cells_keeps_sheets_and_refuses_to_paste_over_formulas(tmp_path: Path, fixture_root: Path) -> None:
    base = fixture_root / "finance_workbook" / "rollouts" / "opus-run-1" / "model.xlsx"
    tool = script("repair-workbook", "xlsx_set_cells.py")
    out = tmp_path / "model.xlsx"
    refused = run_script(tool, str(base), str(out), "--set", "Summary!B6=0.14")
    assert refused.returncode == 2 and "breaks the model" in refused.stderr and not out.exists()
    done = run_script(tool, str(base), str(out), "--set", "Summary!B6==B1/500000-1")
    assert done.returncode == 0, done.stderr
    before, after = openpyxl.load_workbook(base), openpyxl.load_workbook(out)
    assert after.sheetnames == before.sheetnames
    assert after["Summary"]["B6"].value == "=B1/500000-1"
    assert after["Summary"]["B6"].number_format == before["Summary"]["B6"].number_format
    assert after["Costs"]["D6"].value == before["Costs"]["D6"].value
