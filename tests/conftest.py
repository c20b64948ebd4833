"""Shared fixtures: temp stores, the real embedded model, a real llama.cpp server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

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
    monkeypatch.setenv("VERISCALE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(autouse=True)
def _forget_runtime_choices():
    """A command's settings are process-wide (veriscale.settings.choose): each test starts without them."""
    from veriscale import settings as runtime

    runtime.choose({})
    yield
    runtime.choose({})


@pytest.fixture(scope="session")
def embedded_model():
    from veriscale.models.embedded import EmbeddedModel

    return EmbeddedModel.load()


@pytest.fixture(scope="session")
def llama_server():
    """A real ``python -m llama_cpp.server`` serving the embedded GGUF with logits for every token."""
    from tests.support.llama_server import start_llama_server, stop_llama_server

    proc, url = start_llama_server("--logits_all", "true")
    yield url
    stop_llama_server(proc)
