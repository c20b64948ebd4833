"""The embedded model's thread count is a setting (URI ``embedded?threads=N``, the CLI's
``--threads``), read by the real llama.cpp context; its GGUF hash is kept across processes."""

from __future__ import annotations

import json

import llama_cpp
import pytest
from typer.testing import CliRunner

from veriscale.cli import app
from veriscale.errors import UserError
from veriscale.settings import source as setting_source
from veriscale.models.embedded import EmbeddedModel
from veriscale.models.embedded_files import all_cores
from veriscale.models.uri import load_backend

pytestmark = pytest.mark.embedded


@pytest.fixture()
def restore_threads(embedded_model):
    yield embedded_model
    setting_source.choose({})
    EmbeddedModel.load()  # back to every core for the tests after this one


def _threads(model: EmbeddedModel) -> tuple[int, int, int]:
    return model.threads, llama_cpp.llama_n_threads(model._llm.ctx), llama_cpp.llama_n_threads_batch(model._llm.ctx)


def test_the_uri_sets_the_threads_of_the_real_context(restore_threads):
    model = load_backend("embedded?threads=1")
    assert model is restore_threads and _threads(model) == (1, 1, 1)
    assert model.uri == "embedded"  # the thread count does not change a verdict, nor its cache key
    assert _threads(EmbeddedModel.load()) == (all_cores(),) * 3


def test_the_threads_flag_reaches_the_embedded_model(restore_threads, tmp_path):
    (tmp_path / "task.md").write_text("Add 2 and 2.")
    (tmp_path / "a.md").write_text("4")
    (tmp_path / "b.md").write_text("5")
    r = CliRunner().invoke(app, ["--threads", "1", "select", str(tmp_path / "task.md"), str(tmp_path / "a.md"),
                                 str(tmp_path / "b.md"), "--dry-run", "--json", "--store", str(tmp_path / "s.db")])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["dry_run"] is True
    assert _threads(restore_threads) == (1, 1, 1)


def test_the_threads_environment_variable_reaches_a_library_load(restore_threads, monkeypatch):
    monkeypatch.setenv("VERISCALE_THREADS", "1")  # the Python API: no CLI resolved anything
    assert _threads(EmbeddedModel.load()) == (1, 1, 1)
    monkeypatch.setenv("VERISCALE_THREADS", "lots")
    with pytest.raises(UserError, match=r"\$VERISCALE_THREADS='lots' is not a whole number"):
        EmbeddedModel.load()
    monkeypatch.delenv("VERISCALE_THREADS")  # before restore_threads loads the model again


@pytest.mark.parametrize("args,needle", [
    (["--threads", "-1", "runs", "list"], "--threads = -1 is below 0"),  # 0 means one thread per core
    (["--threads", "two", "runs", "list"], "Invalid value for '--threads'"),
])
def test_a_bad_thread_count_is_one_sentence(args, needle, tmp_path):
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("uri,needle", [
    ("embedded?threads=many", "option threads=many in model URI"),
    ("embedded?threads=-2", "threads=-2 is not a positive number"),
    ("embedded?color=red", "unknown option color in model URI"),
])
def test_bad_embedded_options_say_what_to_write(uri, needle):
    with pytest.raises(UserError, match=needle):
        load_backend(uri)


def test_the_gguf_hash_is_kept_for_the_next_process(embedded_model, tmp_path, monkeypatch):
    from veriscale.models import embedded_files as embedded

    monkeypatch.setenv("VERISCALE_CACHE_DIR", str(tmp_path))
    embedded.file_sha256.cache_clear()
    first = embedded_model.fingerprint()
    kept = json.loads((tmp_path / "gguf-hashes.json").read_text())
    assert list(kept.values()) == [first.removeprefix("gguf:")]
    entry = next(iter(kept))
    kept[entry] = "0" * 64  # what a later process reads instead of hashing the file again
    (tmp_path / "gguf-hashes.json").write_text(json.dumps(kept))
    embedded.file_sha256.cache_clear()
    assert embedded_model.fingerprint() == "gguf:" + "0" * 64
    embedded.file_sha256.cache_clear()
