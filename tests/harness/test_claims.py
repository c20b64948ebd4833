"""The claim map on the fixture tasks: known consensus, disputed and omitted claims; the agenda;
the JSON schema; and bad input."""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import jsonschema
import pytest

from veriscale.errors import UserError
from veriscale.harness.claims.claim_map import (
    ClaimMap,
    build_agenda,
    build_claim_map,
    classify,
    information_gain,
    validate,
)
from veriscale.harness.claims.report import write_claim_map
from veriscale.harness.claims.extract import Claim, choose_key_column, text_number_claims


def _support(record, by_name: dict[str, str]) -> dict[str, set[str]]:
    """{display value: set of original rollout names} for one claim record."""
    back = {label: name for name, label in by_name.items()}
    return {c.display: {back[r] for r in c.rollouts} for c in record.candidates}


@pytest.fixture(scope="module")
def maps(materialized: dict) -> dict[str, tuple[ClaimMap, dict[str, str]]]:
    return {name: (build_claim_map(built["dir"]), built["by_name"]) for name, built in materialized.items()}


def test_finance_shared_wrong_growth_is_consensus(maps) -> None:
    claims, _ = maps["finance_workbook"]
    growth = claims.by_key()["model.xlsx:Summary!B6"]
    assert growth.status == "consensus"
    assert growth.candidates[0].value == pytest.approx(0.1875)  # every run used the stale 480,000
    assert growth.candidates[0].formulas == ["=B1/480000-1"]
    assert claims.by_key()["model.xlsx:Summary!B1"].status == "consensus"


def test_finance_wrong_formulas_are_disputed_with_their_supporters(maps) -> None:
    claims, by_name = maps["finance_workbook"]
    gross = claims.by_key()["model.xlsx:Summary!B4"]
    assert gross.status == "disputed"
    assert _support(gross, by_name) == {
        "0.598245614": {"opus-run-1", "opus-run-3", "opus-run-4"},
        "1.489082969": {"opus-run-2", "opus-run-5"},
    }
    assert gross.candidates[1].formulas == ["=(Revenue!B6-Costs!B6)/Costs!B6"]
    costs = claims.by_key()["model.xlsx:Costs!D6"]
    assert _support(costs, by_name)["257000"] == {"opus-run-3"}
    operating = claims.by_key()["model.xlsx:Summary!B5"]
    assert [c.support for c in operating.candidates] == [3, 1, 1]


def test_finance_missing_sheet_is_omitted_and_also_noted_on_disputed_cells(maps) -> None:
    claims, by_name = maps["finance_workbook"]
    sheet = claims.by_key()["model.xlsx:Margin (sheet)"]
    assert sheet.status == "omitted"
    assert sheet.missing_from == [by_name["opus-run-4"]]
    margin_cell = claims.by_key()["model.xlsx:Margin!B6"]
    assert margin_cell.status == "disputed"
    assert margin_cell.missing_from == [by_name["opus-run-4"]]


def test_cleanup_dedupe_rule_dispute_and_dropped_row(maps) -> None:
    claims, by_name = maps["data_cleanup"]
    keyed = claims.by_key()
    assert _support(keyed["summary.json:$.rows_out"], by_name) == {
        "9": {"d-run-a", "d-run-c", "d-run-e"}, "8": {"d-run-b", "d-run-d"}}
    assert _support(keyed["customers_clean.csv:row_count"], by_name) == {
        "9": {"d-run-a", "d-run-c", "d-run-e"}, "8": {"d-run-b", "d-run-d"}}
    dropped = keyed["customers_clean.csv:[customer_id=C007].spend"]
    assert dropped.status == "omitted"
    assert set(dropped.missing_from) == {by_name["d-run-b"], by_name["d-run-d"]}
    # every run kept the internal test account: a shared error looks like consensus
    assert keyed["customers_clean.csv:[customer_id=C006].email"].status == "consensus"


def test_cleanup_month_first_dates_and_missing_breakdown(maps) -> None:
    claims, by_name = maps["data_cleanup"]
    keyed = claims.by_key()
    assert _support(keyed["customers_clean.csv:[customer_id=C001].signup_date"], by_name)["2024-03-01"] == {"d-run-c"}
    march = keyed['summary.json:$.spend_by_month["2024-03"]']
    assert march.status == "disputed" and len(march.candidates) == 3
    assert march.missing_from == [by_name["d-run-e"]]
    assert keyed["summary.json:$.date_format"].status == "consensus"


def test_report_growth_rate_dispute_and_missing_docx(maps) -> None:
    claims, by_name = maps["quarterly_report"]
    keyed = claims.by_key()
    growth = keyed["report.md:year-over-year revenue growth (%)"]
    assert _support(growth, by_name) == {"20": {"w1", "w3", "w4"}, "16.7": {"w2"}}  # "20%" == "20.0%"
    assert keyed["report.docx:(file)"].missing_from == [by_name["w3"]]
    assert keyed["report.docx:year-over-year revenue growth (%)"].missing_from == [by_name["w3"]]
    customers = keyed["report.md:active customers"]
    assert customers.status == "consensus" and customers.candidates[0].value == 1240.0
    assert keyed["report.md:revenue"].candidates[0].value == 4_200_000.0


def test_every_key_has_exactly_one_consistent_class(maps) -> None:
    for claims, _ in maps.values():
        counts = claims.counts()
        assert sum(counts.values()) == len(claims.claims) == len(claims.by_key())
        for record in claims.claims:
            rollouts = [r for c in record.candidates for r in c.rollouts]
            assert sorted(rollouts + record.missing_from) == claims.rollouts
            if record.status == "consensus":
                assert len(record.candidates) == 1 and not record.missing_from
            elif record.status == "omitted":
                assert len(record.candidates) == 1 and record.missing_from
            else:
                assert len(record.candidates) >= 2


def test_information_gain_prefers_a_three_way_split() -> None:
    assert information_gain([3, 1, 1]) > information_gain([3, 2]) > information_gain([4, 1])
    assert information_gain([2, 2, 1]) > information_gain([3, 2])
    # with no smoothing and no "none of them" mass, a fair two-way split is exactly one bit
    assert information_gain([2, 2], alpha=1e-12) == pytest.approx(1.0, abs=1e-6)


def test_agenda_ranks_the_three_way_cell_first_within_its_sheet(maps) -> None:
    claims, _ = maps["finance_workbook"]
    agenda = build_agenda(claims)
    ranks = {item["key"]: item["rank"] for item in agenda["items"]}
    assert ranks["model.xlsx:Summary!B5"] < ranks["model.xlsx:Summary!B4"]
    assert [i["rank"] for i in agenda["items"]] == list(range(1, len(agenda["items"]) + 1))
    priorities = [i["priority"] for i in agenda["items"]]
    assert priorities == sorted(priorities, reverse=True)
    top = agenda["items"][0]
    assert math.isclose(sum(c["prior"] for c in top["candidates"]) + top["prior_none_of_them"], 1.0, abs_tol=1e-5)


def test_agenda_weights_claims_with_more_related_claims() -> None:
    stated = {
        "r01": [Claim("a.xlsx:S!A1", "xlsx_cell", "a.xlsx", "S!A1", "a.xlsx:S", 1.0),
                Claim("b.json:$.x", "json_field", "b.json", "$.x", "b.json:$", 1.0)]
               + [Claim(f"a.xlsx:S!B{i}", "xlsx_cell", "a.xlsx", f"S!B{i}", "a.xlsx:S", 0.0) for i in range(8)],
        "r02": [Claim("a.xlsx:S!A1", "xlsx_cell", "a.xlsx", "S!A1", "a.xlsx:S", 2.0),
                Claim("b.json:$.x", "json_field", "b.json", "$.x", "b.json:$", 2.0)]
               + [Claim(f"a.xlsx:S!B{i}", "xlsx_cell", "a.xlsx", f"S!B{i}", "a.xlsx:S", 0.0) for i in range(8)],
    }
    claim_map = ClaimMap("t", ["r01", "r02"], 1e-6, classify(stated))
    items = build_agenda(claim_map)["items"]
    assert [i["key"] for i in items] == ["a.xlsx:S!A1", "b.json:$.x"]
    assert items[0]["gain_bits"] == items[1]["gain_bits"]
    assert items[0]["related_claims"] == 8 and items[1]["related_claims"] == 0


def test_numbers_within_relative_tolerance_are_one_value() -> None:
    stated = {label: [Claim("f.csv:[id=1].x", "csv_cell", "f.csv", "[id=1].x", "f.csv:[id=1]", value)]
              for label, value in (("r01", 100.0), ("r02", 100.00001), ("r03", 101.0))}
    loose = classify(stated, rel_tol=1e-4)[0]
    assert [c.support for c in loose.candidates] == [2, 1]
    assert len(classify(stated, rel_tol=1e-9)[0].candidates) == 3


def test_text_claims_are_keyed_by_their_label_words() -> None:
    found = list(text_number_claims([
        "Total revenue: 1,234.5",
        "The operating margin was 18%",
        "1. Revenue grew 12.5% from 2023 to 2024",
        "| Headcount | 188 | 212 |",
        "Signed on 2024-03-01",
    ]))
    assert found == [("total revenue", 1234.5), ("operating margin (%)", 18.0),
                     ("revenue grew (%)", 12.5), ("headcount", 188.0), ("headcount [2]", 212.0)]


def test_csv_key_column_is_chosen_across_versions() -> None:
    header = ["name", "customer_id", "spend"]
    clean = (header, [["Ann", "C1", "5"], ["Bob", "C2", "5"]])
    duplicated = (header, [["Ann", "C1", "5"], ["Ann", "C3", "7"]])
    assert choose_key_column([clean, duplicated]) == "customer_id"
    assert choose_key_column([(["x"], [["1"], ["1"]])]) is None


def test_written_files_validate_against_the_schemas(maps, tmp_path: Path) -> None:
    claims, _ = maps["data_cleanup"]
    paths = write_claim_map(claims, tmp_path / "out")
    claims_doc = json.loads(paths["claims"].read_text())
    validate(claims_doc, "claims")
    validate(json.loads(paths["agenda"].read_text()), "agenda")
    report = paths["report"].read_text()
    assert f"**{claims.counts()['disputed']} disputed**" in report
    assert "summary.json:$.spend_by_month" in report
    broken = copy.deepcopy(claims_doc)
    consensus = next(c for c in broken["claims"] if c["status"] == "consensus")
    consensus["candidates"].append(dict(consensus["candidates"][0], display="other"))
    with pytest.raises(jsonschema.ValidationError):
        validate(broken, "claims")


def test_one_rollout_is_a_clear_error(tmp_path: Path, materialized: dict) -> None:
    task = tmp_path / "task"
    shutil.copytree(materialized["quarterly_report"]["dir"], task)
    for extra in sorted((task / "rollouts").iterdir())[1:]:
        shutil.rmtree(extra)
    with pytest.raises(UserError, match="needs at least two"):
        build_claim_map(task)


def test_missing_spec_or_rollouts_is_a_clear_error(tmp_path: Path, materialized: dict) -> None:
    task = tmp_path / "task"
    shutil.copytree(materialized["quarterly_report"]["dir"], task)
    (task / "spec" / "task.md").unlink()
    with pytest.raises(UserError, match="has no spec/task.md"):
        build_claim_map(task)
    (task / "spec" / "task.md").write_text("x")
    shutil.rmtree(task / "rollouts")
    with pytest.raises(UserError, match="has no rollouts"):
        build_claim_map(task)


def test_corrupt_deliverables_become_warnings_not_crashes(tmp_path: Path, materialized: dict) -> None:
    task = tmp_path / "task"
    shutil.copytree(materialized["quarterly_report"]["dir"], task)
    broken = sorted((task / "rollouts").glob("*/deliverables/report.docx"))[0]
    broken.write_bytes(b"not a docx")
    claims = build_claim_map(task)
    assert any("report.docx could not be read" in w for w in claims.warnings)
    label = broken.parents[1].name
    growth = claims.by_key()["report.docx:year-over-year revenue growth (%)"]
    assert label in growth.missing_from
    assert label in claims.by_key()["report.docx:(file)"].candidates[0].rollouts  # still delivered
