"""Every criteria pack runs end to end on the embedded model on its bundled example.

Each built-in pack (``veriscale.verify.criteria.PACKS``) has a folder ``examples/domains/<pack>/``
whose README.md holds the exact command in its first fenced ``sh`` block; that command runs here
in process (typer's CliRunner, from the repository root) with ``--json``. The run must exit 0,
name the pack it used (``criteria_set``; for select the run's recorded arguments too) and give every criterion of the pack a reading in [0, 1]. The readings come from the weak
embedded SmolLM2-135M judge: this checks the packs run, not that their verdicts are right.

    python -m pytest -q tests/verify/test_domain_examples.py
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from veriscale.cli import app
from veriscale.verify.criteria import PACKS, load_criteria

REPO = Path(__file__).resolve().parents[2]
DOMAINS = REPO / "examples" / "domains"
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)


def example_command(pack: str) -> list[str]:
    """The arguments after ``veriscale`` of the first ``sh`` block in the pack's example README."""
    readme = (DOMAINS / pack / "README.md").read_text(encoding="utf-8")
    found = SH_BLOCK.search(readme)
    assert found, f"examples/domains/{pack}/README.md has no ```sh block with its command"
    words = shlex.split(found.group(1).strip())
    assert words[0] == "veriscale" and "--json" in words, words
    return words[1:]


def test_every_pack_has_an_example_folder() -> None:
    docs = (REPO / "docs" / "DOMAINS.md").read_text(encoding="utf-8")
    folders = {p.name for p in DOMAINS.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    packs = {p.stem for p in (REPO / "src" / "veriscale" / "verify" / "criteria").glob("*.md")}
    assert packs == set(PACKS)  # the folder of built-in packs and the registered names agree
    assert packs <= folders, f"packs without an example in examples/domains/: {sorted(packs - folders)}"
    for pack in packs:
        readme = (DOMAINS / pack / "README.md").read_text(encoding="utf-8")
        assert re.search(r"licen[cs]e", readme, re.IGNORECASE), f"{pack}: the README names no licence"
        assert "SYNTHETIC" in readme or "real, public" in readme, f"{pack}: say whether the data are real or synthetic"
        args = example_command(pack)
        assert args[args.index("--criteria") + 1] == pack, f"{pack}: the example must pick its own pack"
        assert shlex.join(["veriscale", *args]) in docs, f"docs/DOMAINS.md does not show {pack}'s command as run"
        for arg in args:
            if arg.startswith("examples/"):
                assert (REPO / arg).is_file(), f"{pack}: {arg} is missing"
                assert (REPO / arg).stat().st_size < 16_000, f"{pack}: keep {arg} small (excerpt it)"


def _readings(pack: str, payload: dict, runner: CliRunner, store: Path) -> dict[str, list[float]]:
    """Every reading per criterion, and a check that the output names ``pack``."""
    schema = payload["schema"]
    if schema == "veriscale.score/1":
        assert payload["criteria_set"] == pack
        return {name: [c["reward"]] for name, c in payload["criteria"].items()}
    if schema == "veriscale.compare/1":
        assert payload["criteria_set"] == pack
        return {name: [c["reward_a"], c["reward_b"]] for name, c in payload["criteria"].items()}
    assert schema == "veriscale.select/1", schema
    shown = runner.invoke(app, ["runs", "show", str(payload["run_id"]), "--store", str(store)])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["args"]["criteria"] == pack  # the run records it
    assert payload["criteria_set"] == pack  # and the output names it
    values: dict[str, list[float]] = {}
    for row in payload["ranking"]:
        for name, value in row["criteria"].items():
            values.setdefault(name, []).append(value)
    return values


@pytest.mark.embedded
@pytest.mark.parametrize("pack", PACKS)
def test_the_pack_runs_end_to_end_on_its_example(pack: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the README commands are written from the repository root
    store = tmp_path / "store.sqlite3"
    runner = CliRunner()
    result = runner.invoke(app, [*example_command(pack), "--store", str(store)])
    assert result.exit_code == 0, result.output[-3000:]
    payload = json.loads(result.stdout)
    assert not payload.get("failed"), payload.get("errors")
    readings = _readings(pack, payload, runner, store)
    expected = [c.name for c in load_criteria(pack).items]
    assert sorted(readings) == sorted(expected), (pack, sorted(readings))
    for name, values in readings.items():
        assert values and all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in values), (pack, name, values)
