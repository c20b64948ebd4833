"""The input cap and the run heartbeat threshold, from each of their sources, reach the code that
uses them: a command's reader refuses what is over the cap, and the liveness check reads the
threshold the command was given (flag, environment or config file alike)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from veriscale.cli import app
from veriscale.data import reader
from veriscale.engine import run_liveness

SOURCES = ("flag", "env", "file")


@pytest.fixture(autouse=True)
def _forget_choices():
    """A command's choice is process-wide: put it back so later tests read their own environment."""
    yield
    reader.set_max_input_mb(None)
    run_liveness.set_stale_after_s(None)


def _invoke(tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch, args: list[str], **values: float):
    """Run ``veriscale ARGS`` with ``values`` (setting -> value) given by ``source``."""
    flags = {"max_input_mb": "--max-input-mb", "run_stale_s": "--run-stale-s"}
    envs = {"max_input_mb": "VERISCALE_MAX_INPUT_MB", "run_stale_s": "VERISCALE_RUN_STALE_S"}
    keys = {"max_input_mb": ("inputs", "max_mb"), "run_stale_s": ("runs", "stale_s")}
    config = tmp_path / "config.toml"
    config.write_text("")
    monkeypatch.setenv("VERISCALE_CONFIG", str(config))
    for env in envs.values():
        monkeypatch.delenv(env, raising=False)
    front: list[str] = []
    for name, value in values.items():
        if source == "flag":
            front += [flags[name], str(value)]
        elif source == "env":
            monkeypatch.setenv(envs[name], str(value))
        else:
            table, key = keys[name]
            config.write_text(config.read_text() + f"[{table}]\n{key} = {value}\n")
    return CliRunner().invoke(app, [*front, *args])


@pytest.mark.parametrize("source", SOURCES)
def test_the_input_cap_refuses_a_candidate_from_each_source(tmp_path: Path, source: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "task.md").write_text("Add two and two.")
    (tmp_path / "big.md").write_text("4 " * 2000)  # 4,000 bytes, over a 0.002 MiB (2,097 bytes) cap
    (tmp_path / "small.md").write_text("4")
    base = ["score", str(tmp_path / "task.md"), "--dry-run", "--model", "scripted://fixed"]
    refused = _invoke(tmp_path, source, monkeypatch, [*base[:2], str(tmp_path / "big.md"), *base[2:]], max_input_mb=0.002)
    assert refused.exit_code == 2, refused.output
    assert "big.md' is 4,000 bytes, above the 0.002 MiB input limit" in refused.output
    assert "Traceback" not in refused.output
    taken = _invoke(tmp_path, source, monkeypatch, [*base[:2], str(tmp_path / "small.md"), *base[2:]], max_input_mb=0.002)
    assert "input limit" not in taken.output


@pytest.mark.parametrize("source", SOURCES)
def test_the_heartbeat_threshold_reaches_the_liveness_check(tmp_path: Path, source: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    result = _invoke(tmp_path, source, monkeypatch, ["settings", "--json"], run_stale_s=7.5)
    assert result.exit_code == 0, result.output
    assert run_liveness.stale_after_s() == 7.5
    assert run_liveness.beat_every_s() == pytest.approx(7.5 / 4)


@pytest.mark.parametrize("bad", ["0", "-3", "nan", "inf", "soon"])
def test_a_bad_threshold_or_cap_is_one_sentence(tmp_path: Path, bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for flag in ("--run-stale-s", "--max-input-mb"):
        result = _invoke(tmp_path, "flag", monkeypatch, [flag, bad, "settings"])
        assert result.exit_code == 2, result.output
        assert flag in result.output and "Traceback" not in result.output
