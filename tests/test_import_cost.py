"""Start-up cost: ``import veriscale`` and the CLI load no scipy or numpy (about 1 s of every CLI process).

Each check runs a fresh interpreter (this one has scipy loaded already) and reads its
``sys.modules``; the names themselves still resolve, on first use.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from veriscale.verify.reward import sigmoid


def _modules_after(statement: str) -> dict:
    code = f"import json, sys\n{statement}\nprint(json.dumps({{m: m in sys.modules for m in ('scipy', 'numpy')}}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_veriscale_loads_neither_scipy_nor_numpy():
    assert _modules_after("import veriscale") == {"scipy": False, "numpy": False}


def test_the_cli_loads_neither_scipy_nor_numpy():
    assert _modules_after("import veriscale.cli") == {"scipy": False, "numpy": False}


def test_the_public_names_still_resolve_lazily_and_only_then_load_what_they_need():
    loaded = _modules_after("import veriscale\nfrom veriscale import Verifier, compare, score\n"
                            "assert callable(score) and callable(compare) and Verifier.__name__ == 'Verifier'")
    assert loaded["scipy"] is False


@pytest.mark.parametrize("x", [-1000.0, -30.0, -1.0, 0.0, 0.5, 30.0, 1000.0])
def test_the_math_sigmoid_is_the_logistic_function_without_overflow(x):
    expected = 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0
    assert sigmoid(x) == pytest.approx(expected, rel=1e-12, abs=1e-300)
    assert sigmoid(x) + sigmoid(-x) == pytest.approx(1.0, rel=1e-12)
