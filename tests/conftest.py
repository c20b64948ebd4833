"""Shared fixtures: temp stores, the real embedded model, a real llama.cpp server on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


@pytest.fixture()
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite3"


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test writes into the user's real store."""
    monkeypatch.setenv("VERISCALE_STORE", str(tmp_path / "default-store.sqlite3"))


@pytest.fixture(scope="session")
def embedded_model():
    from veriscale.models.embedded import EmbeddedModel

    return EmbeddedModel.load()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def llama_server():
    """A real ``python -m llama_cpp.server`` serving the embedded GGUF with logits for every token."""
    from veriscale.models.embedded import default_gguf_path

    port = _free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()),
           "--logits_all", "true", "--n_ctx", "8192", "--host", "127.0.0.1", "--port", str(port),
           "--model_alias", "smollm2"]
    log = open(os.devnull, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/models", timeout=1.0).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError("llama_cpp.server did not come up within 120 s")
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
