"""The settings layer (veriscale.settings): below the CLI, the one environment reader, and what
library code reads (the command's choice, else the environment, else the default), with each
setting's own sentence for a bad environment value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from veriscale import settings
from veriscale.errors import UserError
from veriscale.settings.registry import SPEC, SPECS

SRC = Path(__file__).resolve().parents[1] / "src" / "veriscale"
#: modules that hand the whole environment to a child process (or set one variable for their own run)
PASSES_THE_ENVIRONMENT_ON = {"race/worktrees.py", "harness/jail/sandbox.py", "harness/workspace/capped_child.py",
                             "harness/sessions/grep_run.py", "harness/scoring/grader.py",
                             "harness/skills/evidence-xlsx/scripts/xlsx_recalc.py"}


def _library_modules() -> list[Path]:
    return [p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] != "cli" and p.name != "__main__.py"]


def test_library_code_never_imports_the_cli() -> None:
    importing = [p.relative_to(SRC).as_posix() for p in _library_modules()
                 if re.search(r"^\s*(from veriscale\.cli\b|import veriscale\.cli\b)", p.read_text(), re.M)]
    assert importing == []


def test_the_environment_is_read_in_one_place() -> None:
    reading = {p.relative_to(SRC).as_posix() for p in _library_modules() if "os.environ" in p.read_text()
               or "getenv(" in p.read_text()}
    assert reading - PASSES_THE_ENVIRONMENT_ON == {"settings/source.py"}
    assert PASSES_THE_ENVIRONMENT_ON - reading == set()  # the list names only modules that still pass it on


@pytest.mark.parametrize("name", ["max_input_mb", "run_stale_s", "store_wait_s", "threads", "joint", "model_mismatch",
                                  "zip_members", "jail_uid_base"])
def test_value_is_the_choice_else_the_environment_else_the_default(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = SPEC[name]
    monkeypatch.delenv(spec.env, raising=False)
    assert settings.value(name) == spec.default
    given = {"joint": "on", "model_mismatch": "note"}.get(name, "7")
    monkeypatch.setenv(spec.env, given)
    assert settings.value(name) == spec.check(spec.parse(given), name)
    settings.choose({name: spec.default})
    assert settings.value(name) == spec.default  # the command's choice wins over the environment


@pytest.mark.parametrize(("name", "raw", "says"), [
    ("run_stale_s", "soon", "environment variable VERISCALE_RUN_STALE_S='soon' is not a positive number of seconds"),
    ("store_wait_s", "-1", "environment variable VERISCALE_STORE_WAIT='-1' is not a positive number of seconds"),
    ("max_input_mb", "lots", "VERISCALE_MAX_INPUT_MB='lots' is not a size in MiB"),
    ("threads", "-2", "$VERISCALE_THREADS='-2' is not a whole number of CPU threads"),
    ("joint", "maybe", "VERISCALE_JOINT='maybe' is not on or off"),
    ("model_mismatch", "sometimes", "VERISCALE_MODEL_MISMATCH='sometimes' is not fail or note"),
    ("zip_members", "0", "$VERISCALE_ZIP_MEMBERS = '0' is not a positive whole number: fix it or unset it"),
])
def test_a_bad_environment_value_keeps_its_sentence(name: str, raw: str, says: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SPEC[name].env, raw)
    with pytest.raises(UserError) as caught:
        settings.value(name)
    assert str(caught.value).startswith(says)


def test_environment_reads_text_and_takes_blank_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERISCALE_SOMETHING", "  ")
    assert settings.environment("VERISCALE_SOMETHING") is None
    assert settings.environment("X", {"X": "1"}) == "1"


def test_every_setting_has_a_field_and_the_package_exports_the_registry() -> None:
    assert settings.SPECS is SPECS
    assert {spec.name for spec in SPECS} == set(settings.names())
