"""Record checks (ledgers, finish.json, repair.json) and the content-blind delivery gate."""

from __future__ import annotations

import hashlib
from pathlib import Path

from veriscale.harness.protocol.session_records import RecordContext, check_challenger, check_finish, check_repair, check_resolver, evidence_ids
from veriscale.harness.protocol.gate import keep_base_files

AGENDA = {"items": [{"key": "model.xlsx:Summary!B5", "candidates": [{"display": "0.1875"}, {"display": "0.14"}]}]}


def _resolver(verdict: str, claim: str = "model.xlsx:Summary!B5", ident: str = "R1") -> dict:
    return {"id": ident, "claim": claim, "question": "q", "checks": ["recomputed"], "findings": "f", "verdict": verdict}


def test_resolver_verdicts_must_name_a_candidate_or_say_none_or_cannot_tell() -> None:
    for verdict in ("0.1875", "0.14000", "none of them", "Cannot tell"):
        assert check_resolver({"entries": [_resolver(verdict)]}, AGENDA) == []
    problems = check_resolver({"entries": [_resolver("0.2")]}, AGENDA)
    assert len(problems) == 1 and "not one of its candidates (0.1875, 0.14)" in problems[0]
    assert check_resolver({"entries": [_resolver("anything", claim="free question")]}, AGENDA) == []


def test_ledgers_reject_schema_violations_and_duplicate_ids() -> None:
    assert any("checks" in p for p in check_resolver({"entries": [{**_resolver("0.14"), "checks": []}]}))
    assert any("id" in p for p in check_resolver({"entries": [_resolver("0.14", ident="X1")]}))
    assert "used twice" in check_resolver({"entries": [_resolver("0.14"), _resolver("0.14")]})[0]
    entry = {"id": "C1", "claim": "c", "attempt": "a", "finding": "f", "holds": "untested", "because": "b"}
    assert check_challenger({"entries": [entry]}) == []
    assert check_challenger({"entries": [{**entry, "holds": "maybe"}]})
    assert check_challenger({"entries": [{k: v for k, v in entry.items() if k != "because"}]})


def test_finish_checks_base_contract_and_evidence_references() -> None:
    ids = evidence_ids({"entries": [_resolver("0.14")]}, None)
    assert ids == {"resolver:R1"}
    artifact = RecordContext(rollouts=["r01", "r02"], evidence_ids=ids, contract="artifact")
    good = {"base": "r02", "revisions": [{"file": "a", "change": "c", "evidence": ["resolver:R1"]}], "unresolved": []}
    assert check_finish(good, artifact) == []
    assert check_finish({**good, "base": "none"}, artifact) == []
    assert "not a rollout" in check_finish({**good, "base": "r09"}, artifact)[0]
    cites_missing = {**good, "revisions": [{"file": "a", "change": "c", "evidence": ["challenger:C1"]}]}
    assert "cites challenger:C1" in check_finish(cites_missing, artifact)[0]
    pick = RecordContext(rollouts=["r01", "r02"], evidence_ids=ids, contract="pick-only")
    assert any("allows no revisions" in p for p in check_finish(good, pick))
    assert any("needs a base" in p for p in check_finish({**good, "base": "none", "revisions": []}, pick))
    assert check_repair({"base": "r02", "changes": [{"file": "a", "summary": "s", "evidence": ["resolver:R1"]}]}, artifact) == []
    assert check_repair({"base": "r02", "changes": [{"file": "a", "summary": "s", "evidence": ["resolver:R7"]}]}, artifact)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_gate_restores_dropped_base_files_and_reports_every_file_by_sha256(tmp_path: Path) -> None:
    base, out = tmp_path / "base", tmp_path / "out"
    (base / "sub").mkdir(parents=True)
    (base / "a.txt").write_bytes(b"a")
    (base / "sub" / "b.csv").write_bytes(b"b")
    (base / "c.docx").write_bytes(b"c")
    (base / "c.docx.view.txt").write_text("view")  # sidecars are not deliverables
    out.mkdir()
    (out / "a.txt").write_bytes(b"A!")
    (out / "new.md").write_bytes(b"n")
    (out / "c.docx").symlink_to(tmp_path / "elsewhere")
    report = keep_base_files(base, out)
    assert report["restored"] == ["c.docx", "sub/b.csv"] and report["changed"] == ["a.txt"] and report["added"] == ["new.md"]
    assert report["removed_links"] == ["c.docx"]
    assert (out / "sub" / "b.csv").read_bytes() == b"b" and not (out / "c.docx").is_symlink()
    shas = {f["path"]: (f["base_sha256"], f["sha256"]) for f in report["files"]}
    assert shas["a.txt"] == (_sha(b"a"), _sha(b"A!")) and shas["new.md"] == (None, _sha(b"n"))
    assert not (out / "c.docx.view.txt").exists()
