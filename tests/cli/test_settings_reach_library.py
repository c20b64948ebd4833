"""The input cap and the run heartbeat threshold, from each of their sources, reach the code that
uses them: a command's reader refuses what is over the cap, and the liveness check reads the
threshold the command was given (flag, environment or config file alike)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from veriscale import settings as runtime  # the CLI's hand-over
from veriscale.cli import app
from veriscale.settings import SPECS
from veriscale.engine import run_liveness

SOURCES = ("flag", "env", "file")


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


def _example(spec) -> str:
    """A valid value for ``spec`` that differs from its default."""
    if spec.choices:
        return next(c for c in spec.choices if c != spec.default)
    if spec.default is None:  # a path (criteria_dir): any folder name; nothing reads it under `settings`
        return "/srv/criteria-packs"
    if isinstance(spec.default, str):  # a choice written in words (frames: N, every:S or keys)
        return {"frames": "every:2"}[spec.name]
    return str(int(spec.default) + 3 if isinstance(spec.default, int) else spec.default / 2 + 1)


LIBRARY_SPECS = [spec for spec in SPECS if spec.library]


@pytest.mark.parametrize("source", ["flag", "file", "env"])
@pytest.mark.parametrize("spec", LIBRARY_SPECS, ids=[spec.name for spec in LIBRARY_SPECS])
def test_every_library_setting_is_handed_over_from_a_flag_or_the_file(tmp_path: Path, spec, source: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """One mechanism for all of them: a flag's or the file's value is runtime.chosen; the environment's is
    left for the library to read itself (so the Python API reads it the same way)."""
    value = _example(spec)
    switch = spec.choices == ("on", "off")  # --joint/--no-joint takes no value; the file takes true/false
    config = tmp_path / "config.toml"
    table, key = spec.file.rsplit(".", 1)
    written = "true" if switch else repr(value) if spec.choices or not isinstance(spec.default, (int, float)) else value
    config.write_text(f"[{table}]\n{key} = {written}\n" if source == "file" else "")
    monkeypatch.setenv("VERISCALE_CONFIG", str(config))
    monkeypatch.delenv(spec.env, raising=False)
    if source == "env":
        monkeypatch.setenv(spec.env, value)
    front = ([spec.flag] if switch else [spec.flag, value]) if source == "flag" else []
    result = CliRunner().invoke(app, [*front, "settings"])
    assert result.exit_code == 0, result.output
    expected = None if source == "env" else spec.check(spec.parse(value), spec.name)
    assert runtime.chosen(spec.name) == expected
