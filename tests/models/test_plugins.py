"""Backends and importers from another installed distribution (entry point groups
``veriscale.backends`` and ``veriscale.importers``): a tiny plugin is pip-installed for real into
a folder that a ``veriscale select`` subprocess gets on its path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from veriscale.errors import UserError

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "veriscale-tinyplugin"
version = "0.1"

[project.entry-points."veriscale.backends"]
tiny = "veriscale_tinyplugin:from_uri"

[project.entry-points."veriscale.importers"]
tinyfmt = "veriscale_tinyplugin.importer"
"""

BACKEND = '''
"""A backend that prefers the response with more '+' signs; grades nothing else."""
from veriscale.models.base import ChatResponse, ScoreResponse


class Tiny:
    is_embedded = False
    display_name = "tiny plugin model"

    def __init__(self, uri):
        self.uri = uri

    def fingerprint(self):
        return "tiny:v1"

    def context_size(self):
        return 100_000

    def count_tokens(self, text):
        return len(text.split()) + 1

    def single_token_labels(self, labels):
        return []

    def score(self, request):
        user = request.messages[-1].content
        first = user.split("## First response", 1)[1].split("## Second response", 1)[0]
        second = user.split("## Second response", 1)[1].split("## Criterion", 1)[0]
        mine = first if "first response" in request.prefill else second
        best = mine.count("+") >= max(first.count("+"), second.count("+"))
        probs = {lab: 0.0 for lab in request.labels}
        probs[request.labels[0] if best else request.labels[-1]] = 1.0
        return ScoreResponse(label_probs=probs, label_mass=1.0, prompt_tokens=1, prompt_tokens_total=1)

    def chat(self, messages, **kwargs):
        return ChatResponse(content="")


def from_uri(uri):
    return Tiny(uri)


from_uri.forms = ("tiny:<anything>",)
'''

IMPORTER = '''
"""Reads .tiny files: one candidate per line, "id: answer"."""
from veriscale.data.model import Candidate

NAME = "tinyfmt"
DESCRIPTION = ".tiny files, one 'id: answer' a line"
READS = "files"


def detect(path):
    return str(path).endswith(".tiny")


def load(path, source):
    out = []
    for line in open(path, encoding="utf-8").read().splitlines():
        if line.strip():
            cid, text = line.split(":", 1)
            out.append(Candidate(id=cid.strip(), text=text.strip(), source=source))
    return out
'''


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("plugin-src")
    (src / "pyproject.toml").write_text(PYPROJECT)
    pkg = src / "veriscale_tinyplugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(BACKEND))
    (pkg / "importer.py").write_text(textwrap.dedent(IMPORTER))
    target = tmp_path_factory.mktemp("plugin-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(src)], check=True, timeout=600)
    assert list(target.glob("veriscale_tinyplugin-0.1.dist-info/entry_points.txt"))
    return target


def _veriscale(plugin_path: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(plugin_path), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "veriscale", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


def test_select_with_a_plugin_backend_and_a_plugin_importer(plugin_path, tmp_path):
    (tmp_path / "task.md").write_text("Write the longest sum.")
    (tmp_path / "runs.tiny").write_text("one: 1\nthree: 1+1+1\ntwo: 1+1\n")
    r = _veriscale(plugin_path, "select", "task.md", "runs.tiny", "--model", "tiny:any", "--criteria", "general",
                   "--criterion", "Correctness", "--store", str(tmp_path / "s.sqlite3"), "--json",
                   cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    picked = json.loads(r.stdout)
    assert picked["best"]["id"] == "three" and picked["usage"]["model_calls"] > 0


def test_an_unknown_scheme_error_lists_the_plugin_forms(plugin_path, tmp_path):
    r = _veriscale(plugin_path, "models", "check", "gpt-9", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "tiny:<anything>" in r.stderr and "unknown model URI 'gpt-9'" in r.stderr


def test_without_the_plugin_the_scheme_is_unknown(tmp_path):
    from veriscale.models.uri import load_backend

    with pytest.raises(UserError, match="unknown model URI 'tiny:any'"):
        load_backend("tiny:any")
