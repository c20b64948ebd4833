"""Context fit against a real ``python -m llama_cpp.server`` (it does not report its context):
token counts come from its tokenizer, the first overflow names the context, and ``select``
refits to it; a ``--budget-tokens`` that cannot fit is refused in one sentence.

The selects run on a server of their own with ``--n_ctx 2048``: the same behaviour as the
measured ``--n_ctx 8192`` case (tests/integration/test_llama_server.py's fixture), at a quarter of
the prompt tokens, which a server with ``--logits_all`` on two busy cores needs minutes for.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from veriscale.models.base import Message, ScoreRequest
from veriscale.models.context import ContextOverflow
from veriscale.models.uri import load_backend

pytestmark = pytest.mark.server
REPO = Path(__file__).resolve().parents[2]
CODE = (REPO / "src/veriscale/models/openai_compat.py").read_text(encoding="utf-8")
CJK = "这是一个测试。我们需要确认分词器对中文的处理方式是否符合预期。東京都は日本の首都です。한국어 문장도 있습니다。" * 40
WORDS = "the quick brown fox jumps over a lazy dog while parsing tokens and counting context windows".split()


@pytest.fixture(scope="module")
def embedded_tokenizer():
    """The tokenizer of the GGUF the server serves (vocab only, no weights)."""
    from llama_cpp import Llama

    from veriscale.models.embedded_files import default_gguf_path

    llm = Llama(model_path=str(default_gguf_path()), vocab_only=True, verbose=False)
    yield lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))
    llm.close()


def _essay(seed: int, words: int = 9000) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


@pytest.mark.parametrize("text", [CODE, CJK], ids=["code", "cjk"])
def test_token_counts_come_from_the_server_tokenizer(llama_server, embedded_tokenizer, text):
    model = load_backend(llama_server + "#smollm2")
    assert model.count_tokens(text) == embedded_tokenizer(text)


def test_an_overflow_teaches_the_backend_the_server_context(llama_server):
    model = load_backend(llama_server + "?retries=0#smollm2")
    assert model.context_size() is None  # llama_cpp.server does not report it
    request = ScoreRequest(messages=(Message("user", _essay(1, 9000)),), prefill="Grade:", labels=("A", "B"))
    with pytest.raises(ContextOverflow, match="longer than the 8192-token context") as err:
        model.score(request)
    assert err.value.context == 8192 and err.value.requested > 8192
    assert model.context_size() == 8192


@pytest.fixture(scope="module")
def small_server():
    """A real llama_cpp.server with a 2048-token context."""
    from tests.support.llama_server import start_llama_server, stop_llama_server

    proc, url = start_llama_server("--logits_all", "true", n_ctx=2048)
    yield url
    stop_llama_server(proc)


def _select(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "task.md").write_text("Write a long essay about foxes.\n")
    for name, seed in (("a.md", 1), ("b.md", 2)):
        (tmp_path / name).write_text(_essay(seed, 3000))
    # a long HTTP timeout and no retries: a slow machine is no reason to send the same call again
    cmd = [sys.executable, "-m", "veriscale", "select", "--task", "task.md", "a.md", "b.md", "--model",
           url + "?timeout=1200&retries=0#smollm2",
           "--criteria", "general", "--criterion", "Correctness", "--store", str(tmp_path / "s.sqlite3"), "--json",
           *extra]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=1800, env=dict(os.environ))


def test_select_fits_the_context_the_server_names(small_server, tmp_path):
    r = _select(tmp_path, small_server)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["usage"]["model_calls"] > 0 and out["usage"]["failed_calls"] == 0 and out["best"]["id"] in ("a", "b")
    assert out["plan"]["budget_tokens"] < 1024
    assert any("overflowed the model's 2048-token context" in n for n in out["notes"])


def test_an_explicit_budget_that_cannot_fit_names_budget_tokens(small_server, tmp_path):
    r = _select(tmp_path, small_server, "--budget-tokens", "1500")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert "--budget-tokens 1500 does not fit the model's 2048-token context" in lines[0]
