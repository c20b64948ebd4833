"""The DeepEval metric (veriscale.integrations.deepeval_metric).

DeepEval pins rich<15 and click<8.4 and brings pytest plugins, so it lives in its own virtualenv,
.tools/deepeval-venv (scripts/install-test-tools.sh makes it, with the system site packages, so it
sees this veriscale). The DeepEval test file, tests/integrations/deepeval_cases, runs there as a
subprocess, offline: telemetry, update checks and .env reading off, DeepEval's state in a temp folder.
So do docs/INTEGRATIONS.md's DeepEval examples (its blocks marked ``runs-in-ci: by`` this file), as
written: ``deepeval test run test_answers.py`` and the ``evaluate`` script, with the venv first on PATH.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_blocks import blocks_run_by
from veriscale.errors import UserError

REPO = Path(__file__).resolve().parents[2]
VENV_PYTHON = REPO / ".tools" / "deepeval-venv" / "bin" / "python"
CASES = REPO / "tests" / "integrations" / "deepeval_cases"
THIS_TEST = "tests/integrations/test_deepeval_metric.py"
EXAMPLE_S = 300  # each doc example; CI is a loaded 2-core machine
MISSING = "the veriscale DeepEval metric needs DeepEval (deepeval 4.3 or later): pip install 'veriscale[deepeval]'"


def _offline_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONFIDENT_", "DEEPEVAL_", "OPENAI_API"))}
    env.update(DEEPEVAL_TELEMETRY_OPT_OUT="YES", DEEPEVAL_UPDATE_WARNING_OPT_IN="NO", DEEPEVAL_DISABLE_DOTENV="1",
               DEEPEVAL_HOME=str(tmp_path / "deepeval-home"), DEEPEVAL_CACHE_FOLDER=str(tmp_path / ".deepeval"),
               PYTHONDONTWRITEBYTECODE="1")
    return env


def test_the_deepeval_cases_pass_under_deepevals_own_interpreter(tmp_path: Path):
    assert VENV_PYTHON.is_file(), (f"{VENV_PYTHON.relative_to(REPO)} is missing: run scripts/install-test-tools.sh, "
                                   "which makes DeepEval's own virtualenv")
    done = subprocess.run([str(VENV_PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(CASES)], cwd=tmp_path, env=_offline_env(tmp_path), capture_output=True, text=True,
                          timeout=240)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    summary = [line for line in out.splitlines() if re.search(r"\d+ passed", line)]
    assert summary and not re.search(r"failed|error|skipped", summary[-1]), out[-3000:]


def test_the_integrations_docs_deepeval_examples_run_as_written(tmp_path: Path):
    assert VENV_PYTHON.is_file(), "run scripts/install-test-tools.sh, which makes DeepEval's own virtualenv"
    blocks = blocks_run_by(THIS_TEST, REPO / "docs" / "INTEGRATIONS.md")
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in _offline_env(tmp_path).items() if not k.startswith("VERISCALE_")}  # a new user's
    env["PATH"] = f"{VENV_PYTHON.parent}{os.pathsep}{env.get('PATH', '')}"  # as after `. .venv-deepeval/bin/activate`
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH", "")) if p)  # this checkout's
    printed: dict[str, str] = {}
    for block in blocks:
        if block.file is not None:
            (work / block.file).write_text(block.text, encoding="utf-8")
            continue
        done = subprocess.run(["bash", "-e", "-c", block.text], cwd=work, env=env, capture_output=True, text=True,
                              timeout=EXAMPLE_S)
        out = done.stdout + done.stderr
        assert done.returncode == 0, f"{block.name} exited {done.returncode}:\n{block.text}\n{out[-6000:]}"
        assert "Traceback" not in out, f"{block.name}:\n{out[-6000:]}"
        printed[block.text] = done.stdout
    [test_run] = [out for text, out in printed.items() if "deepeval test run test_answers.py" in text]
    assert "Pass Rate: 100.0% | Passed: 1 | Failed: 0" in test_run, test_run[-3000:]
    assert "1 passed" in test_run and "PASSED" in test_run, test_run[-3000:]  # the table's width is the terminal's
    [evaluated] = [out for text, out in printed.items() if "python evaluate_answers.py" in text]
    lines = evaluated.splitlines()  # DeepEval's own summary, then the script's four lines
    assert "Pass Rate: " in evaluated, evaluated[-3000:]
    for answer in ("4", "5"):
        shown = [line for line in lines if re.fullmatch(rf"'{answer}': score 0\.\d{{3}}, success (True|False)", line)]
        assert len(shown) == 1, evaluated[-3000:]
    reason = [line for line in lines if line.startswith("veriscale reward ")]
    assert len(reason) == 1 and "from embedded with criteria 'general' on the letters:20 scale:" in reason[0], evaluated
    assert any(re.match(r"Correctness: reward 0\.\d{3}, label mass 0\.\d{3}", line) for line in lines), evaluated


def test_import_veriscale_does_not_import_deepeval_even_where_it_is_installed(tmp_path: Path):
    assert VENV_PYTHON.is_file(), "run scripts/install-test-tools.sh, which makes DeepEval's own virtualenv"
    code = ("import sys, veriscale, veriscale.api, veriscale.integrations\n"
            "from veriscale import score\n"
            "assert 'deepeval' not in sys.modules, sorted(m for m in sys.modules if 'deepeval' in m)")
    done = subprocess.run([str(VENV_PYTHON), "-c", code], cwd=tmp_path, env=_offline_env(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_venv_keeps_deepevals_pins_to_itself():
    from importlib.metadata import version

    assert int(version("rich").split(".")[0]) >= 15, "deepeval's rich<15 reached this environment"
    with pytest.raises(ImportError):  # nor deepeval itself, with its pytest plugins
        importlib.import_module("deepeval")


def test_a_missing_deepeval_is_one_sentence_naming_the_extra(monkeypatch: pytest.MonkeyPatch):
    from veriscale.integrations import require_deepeval

    monkeypatch.setitem(sys.modules, "deepeval", None)
    monkeypatch.delitem(sys.modules, "veriscale.integrations.deepeval_metric", raising=False)
    with pytest.raises(UserError) as called:
        require_deepeval()
    with pytest.raises(UserError) as imported:
        importlib.import_module("veriscale.integrations.deepeval_metric")
    assert str(called.value) == str(imported.value) == MISSING
    assert "\n" not in MISSING
