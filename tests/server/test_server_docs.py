"""docs/SERVER.md's REST examples run as written, with curl, against a real ``veriscale serve``
on the embedded model over a fresh store; its Python example too."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.serve_process import free_port as _free_port, wait_up as _wait_up

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "SERVER.md").read_text()

pytestmark = pytest.mark.embedded


def _commands() -> list[str]:
    block = next(b for b in re.findall(r"```sh\n(.*?)```", DOC, flags=re.S) if "/api/jobs" in b)
    joined = block.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def test_the_rest_examples_run_as_written(tmp_path):
    port = _free_port()
    log = tmp_path / "serve.log"
    proc = subprocess.Popen([sys.executable, "-m", "veriscale", "serve", "--store", str(tmp_path / "demo.sqlite3"),
                             "--allow-dir", "examples", "--port", str(port)], cwd=REPO, stdout=log.open("wb"),
                            stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, "VERISCALE_CONFIG": ""})
    try:
        _wait_up(f"http://127.0.0.1:{port}", proc, log)
        outputs = []
        for command in _commands():
            done = subprocess.run(["sh", "-c", command.replace("8765", str(port))], cwd=REPO, capture_output=True,
                                  text=True, timeout=600)
            assert done.returncode == 0, (command, done.stderr, log.read_text())
            outputs.append(done.stdout)
        assert json.loads(outputs[0])["status"] == "queued"
        assert json.loads(outputs[2])["result"]["reward"] is not None
        assert "event: end" in outputs[5] and '"status": "ok"' in outputs[5]
        selection = json.loads(outputs[6])
        assert {c["id"] for c in selection["candidates"]} == {"a", "b"} and selection["judgements"]
        assert json.loads(outputs[7])["total"] == 1
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def test_the_python_example_runs(tmp_path, monkeypatch):
    code = next(b for b in re.findall(r"```python\n(.*?)```", DOC, flags=re.S) if "score(" in b)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert 0.0 <= float(done.stdout.strip()) <= 1.0
