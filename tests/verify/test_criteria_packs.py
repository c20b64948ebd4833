"""Criteria packs are data: each built-in pack parses with a one-line rationale per criterion that
never reaches a prompt; ``agent`` is ``terminal`` under its old name (same criteria, same prompts,
so the same cache keys); a user's folder (the ``criteria_dir`` setting) and a plugin's entry
point add packs beside the built-in ones; an unknown name lists the packs."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from veriscale.cli import app
from veriscale.errors import UserError
from veriscale.verify.criteria import ENTRY_POINT_GROUP, PACKS, available_packs, load_criteria
from veriscale.verify.prompts import pointwise_request
from veriscale.verify.scale import parse_scale

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", PACKS)
def test_each_pack_has_criteria_with_a_rationale_that_no_prompt_carries(name: str) -> None:
    crits = load_criteria(name)
    assert crits.name == name and len(crits.items) >= 2
    scale = parse_scale("letters")
    for c in crits.items:
        assert c.description and c.rationale and "Why:" not in c.description
        prompt = pointwise_request("Do the task.", "An answer.", c, crits.note, scale).messages[-1].content
        assert c.description in prompt and c.rationale not in prompt


def test_agent_is_terminal_under_its_old_name_with_the_same_criteria_text() -> None:
    old = subprocess.run(["git", "show", "4eaf5c6:src/veriscale/verify/criteria/agent.md"], cwd=REPO,
                         capture_output=True, text=True)
    agent, terminal = load_criteria("agent"), load_criteria("terminal")
    assert [(c.name, c.description) for c in agent.items] == [(c.name, c.description) for c in terminal.items]
    assert agent.note == terminal.note and agent.name == "terminal"
    if old.returncode == 0:  # a full clone: the pack says what agent.md said before packs, word for word
        for c in terminal.items:
            assert c.description in old.stdout


def test_a_folder_of_your_own_packs_is_listed_beside_the_built_in_ones(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "legal.md").write_text("# Contracts\n\n## Clauses\n> Why: a missing clause is a missing right.\n"
                                       "Every clause the brief asks for is present.\n\n## Citations\nCited law exists.\n")
    (tmp_path / "general.md").write_text("## Hijack\nnot loaded: the built-in name wins\n")
    monkeypatch.setenv("VERISCALE_CRITERIA_DIR", str(tmp_path))  # or --criteria-dir, or criteria.dir in the config
    packs = available_packs()
    assert packs["legal"].origin.startswith("criteria_dir") and packs["general"].origin == "built-in"
    legal = load_criteria("legal")
    assert [c.name for c in legal.items] == ["Clauses", "Citations"] and legal.items[0].rationale
    assert [c.name for c in load_criteria("general").items][0] == "Correctness"
    monkeypatch.setenv("VERISCALE_CRITERIA_DIR", str(tmp_path / "missing"))
    with pytest.raises(UserError, match="is not a folder"):
        load_criteria("legal")


def test_a_plugin_ships_a_pack_by_entry_point(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "veriscale_pack_demo.py").write_text(textwrap.dedent('''
        def pack():
            return "# Demo\\n\\n## Works\\n> Why: it must.\\nIt works.\\n\\n## Fast\\nIt is fast.\\n"
    '''))
    info = tmp_path / "veriscale_pack_demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: veriscale-pack-demo\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ndemo = veriscale_pack_demo:pack\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert available_packs()["demo"].origin == "plugin veriscale_pack_demo:pack"
    assert [c.name for c in load_criteria("demo").items] == ["Works", "Fast"]


def test_an_unknown_pack_is_one_sentence_listing_the_packs() -> None:
    result = CliRunner().invoke(app, ["criteria", "show", "legal"])
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and all(name in errors[0] for name in PACKS)
    listed = CliRunner().invoke(app, ["criteria", "list"])
    assert listed.exit_code == 0 and all(name in listed.output for name in PACKS) and "agent" in listed.output
