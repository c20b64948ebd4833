"""docs/INTEGRATIONS.md's Inspect AI example, run as written with Inspect's own OpenAI-compatible provider.

The doc's ``hello_task.py`` and its ``inspect eval ... --model llama-cpp-python/smollm2`` command run
in a fresh folder with the ``inspect`` of ``.tools/inspect-venv`` (scripts/install-test-tools.sh):
Inspect's ``llama-cpp-python`` provider needs openai 3.4 or later, and veriscale[rl]'s ``verifiers``
pins openai below 3 in the main environment, so that venv sees the main environment's Inspect and
veriscale (``--system-site-packages``) and holds openai 3.x of its own. The solver is a real
``llama_cpp.server`` (the ``llama_server`` fixture: the command's ``LLAMA_CPP_PYTHON_BASE_URL`` is
pointed at it), the verifier the embedded model. The log the command wrote is read back with
``read_eval_log`` and the store it named with veriscale's Store.

tests/integrations/test_inspect_scorer.py keeps the in-environment path (``inspect_ai.eval`` with a
provider registered by ``@modelapi``).
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from tests.support.doc_blocks import REPO, blocks_run_by
from veriscale.engine.store import Store

DOC = REPO / "docs" / "INTEGRATIONS.md"
VENV = REPO / ".tools" / "inspect-venv"
DOC_URL = "http://127.0.0.1:8000/v1"  # the server the doc's command names
INSTALL = "run sh scripts/install-test-tools.sh"


def _venv_openai() -> str:
    python = VENV / "bin" / "python"
    assert python.is_file() and (VENV / "bin" / "inspect").is_file(), f"{VENV} is missing: {INSTALL}"
    proc = subprocess.run([str(python), "-c", "from importlib.metadata import version; print(version('openai'))"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{python} cannot read its openai version ({INSTALL}):\n{proc.stderr[-2000:]}"
    return proc.stdout.strip()


def _major_minor(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def test_the_inspect_venv_has_the_openai_inspects_providers_need_and_the_main_env_does_not() -> None:
    assert _major_minor(_venv_openai()) >= (3, 4), f"{VENV} has openai {_venv_openai()}, below 3.4: {INSTALL}"
    # why the venv exists: veriscale[rl]'s verifiers pins openai below 3 here
    assert _major_minor(version("openai")) < (3, 0), f"the main environment has openai {version('openai')}"


def _env(tmp_path: Path) -> dict[str, str]:
    drop = ("VERISCALE_", "INSPECT_", "LLAMA_CPP_PYTHON_", "OPENAI_")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(drop) and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env.update(PATH=f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}", HOME=str(tmp_path / "home"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CACHE_HOME=os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")),  # the GGUF hash
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    (tmp_path / "home").mkdir()
    return env


@pytest.mark.embedded
@pytest.mark.server
def test_the_documented_inspect_example_runs_with_inspects_own_provider(llama_server: str, tmp_path: Path) -> None:
    _venv_openai()
    work = tmp_path / "work"
    work.mkdir()
    env = _env(tmp_path)
    ran = 0
    started = time.monotonic()
    for block in blocks_run_by("tests/integrations/test_inspect_provider.py", DOC):
        if block.file is not None:
            (work / block.file).write_text(block.text, encoding="utf-8")
            continue
        assert DOC_URL in block.text, f"{block.name} no longer names {DOC_URL}: point it at the fixture another way"
        command = block.text.replace(DOC_URL, llama_server)
        proc = subprocess.run(["bash", "-e", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, (f"{block.name} exited {proc.returncode}:\n{command}\n"
                                      f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        assert "Traceback" not in proc.stderr, f"{block.name}:\n{proc.stderr[-3000:]}"
        print(proc.stdout)  # what the doc shows it printing
        ran += 1
    assert ran == 1 and (work / "hello_task.py").is_file()
    print(f"the example ran in {time.monotonic() - started:.0f} s")

    [log_file] = sorted((work / "logs").glob("*.eval"))  # INSPECT_LOG_DIR's default, below the folder
    log = read_eval_log(str(log_file))
    assert log.status == "success", log.error
    assert log.eval.model == "llama-cpp-python/smollm2"
    # the solver's requests reached the llama server through Inspect's openai provider
    usage = log.stats.model_usage["llama-cpp-python/smollm2"]
    assert usage.input_tokens > 0 and usage.output_tokens > 0, usage

    samples = log.samples or []
    assert sorted(s.epoch for s in samples) == [1, 2, 3]
    for sample in samples:
        assert sample.output.completion.strip(), f"epoch {sample.epoch} has no output"
        scores = sample.scores or {}
        assert 0.0 <= float(scores["veriscale"].value) <= 1.0
        assert scores["veriscale"].answer == sample.output.completion
        assert 0.0 <= float(scores["veriscale_progress"].value) <= 1.0
        assert (scores["veriscale"].metadata or {})["model"] == "embedded"  # VERISCALE_MODEL unset: the default

    reductions = {r.scorer: r for r in log.reductions or []}
    assert reductions["veriscale"].reducer == "veriscale_best"
    [reduced] = reductions["veriscale"].samples
    pick = (reduced.metadata or {})["veriscale_pick"]
    assert pick["epochs"] == 3 and pick["epoch"] in (1, 2, 3)
    assert pick["distinct_outputs"] > 1, "the three epochs gave one output at temperature 1.2: no selection ran"
    [progress] = reductions["veriscale_progress"].samples
    values = [float((s.scores or {})["veriscale_progress"].value) for s in samples]
    assert math.isclose(float(progress.value), sum(values) / len(values))

    store = work / "runs.sqlite3"  # VERISCALE_STORE=runs.sqlite3, relative to the folder the command ran in
    assert (work / pick["store"]).resolve() == store.resolve()  # relative or absolute
    st = Store.open(store)
    try:
        commands = [r.command for r in st.runs()]
        assert st.run(pick["run_id"]).command == "select"
    finally:
        st.close()
    assert commands.count("score") == 3 and commands.count("select") == 1, commands
