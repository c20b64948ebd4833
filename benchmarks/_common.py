"""Helpers shared by the benchmarks: dev pairs and a local llama.cpp server."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

DATA = Path(os.environ.get("VERISCALE_DEV_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


class Progress:
    """Progress lines on stderr for a benchmark's main loop, in bench_injection.py's style
    (``joint on: pair 3 of 20 (41 s)``): at most one every ``every_s`` seconds, and the last one
    always, so a piped or logged run shows it is alive and stdout keeps only the results::

        tick = Progress("joint on", len(pairs), "pair")
        for pair in pairs:
            ...
            tick()
    """

    def __init__(self, label: str, total: int, unit: str = "item", every_s: float = 5.0) -> None:
        self.label, self.total, self.unit, self.every_s = label, total, unit, every_s
        self.done, self.started = 0, time.perf_counter()
        self._last = float("-inf")

    def __call__(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if self.done >= self.total or now - self._last >= self.every_s:
            self._last = now
            print(f"{self.label}: {self.unit} {self.done} of {self.total} ({now - self.started:.0f} s)",
                  file=sys.stderr, flush=True)


def dev_data() -> Path:
    """The shared dev data folder (``$VERISCALE_DEV_DATA``, else ``shared/data`` beside the clone);
    a missing folder ends the benchmark with one sentence, not a traceback."""
    if not DATA.is_dir():
        sys.exit(f"benchmark data folder '{DATA}' is missing: put the shared dev data there (shared/data "
                 "beside the clone; see its README) or set VERISCALE_DEV_DATA to its folder")
    return DATA


def dev_file(name: str) -> Path:
    """One file of the shared dev data; a missing one ends the benchmark with one sentence."""
    path = dev_data() / name
    if not path.is_file():
        sys.exit(f"benchmark data file '{path}' is missing: the shared dev data folder lacks it (see its "
                 "README for the sources), or set VERISCALE_DEV_DATA to a folder that has it")
    return path


def dev_pairs(n: int, max_chars: int = 3000, path: Path | None = None) -> list[dict]:
    """The first n LLMBar/MT-Bench dev pairs whose texts are short enough for the small model
    (from ``path``, default the shared dev data)."""
    rows = []
    with open(path or dev_file("pairwise_dev.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if len(r["instruction"]) + len(r["output_1"]) + len(r["output_2"]) <= max_chars:
                rows.append(r)
            if len(rows) == n:
                break
    return rows


def wait_models(url: str, tries: int = 200, pause_s: float = 0.05) -> None:
    """Return once ``GET url/models`` answers 200 (an OpenAI-compatible server is up), or after ``tries``."""
    for _ in range(tries):
        try:
            if httpx.get(url + "/models", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(pause_s)


@contextmanager
def llama_server(gguf: str, n_ctx: int = 8192) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--logits_all", "true",
                             "--n_ctx", str(n_ctx), "--host", "127.0.0.1", "--port", str(port),
                             "--model_alias", "smollm2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_models(url, tries=240, pause_s=0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


EVAL_LINE = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


def start_verbose_server(log: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    """A ``llama_cpp.server`` of the embedded GGUF whose verbose log (the tokens each request
    really evaluated) goes to ``log``; returns the process and its /v1 URL."""
    from veriscale.models.embedded_files import default_gguf_path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()),
                             "--logits_all", "true", "--n_ctx", "8192", "--verbose", "true", *extra,
                             "--host", "127.0.0.1", "--port", str(port), "--model_alias", "smollm2"],
                            stdout=subprocess.DEVNULL, stderr=log.open("w"))
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(240):
        try:
            if httpx.get(url + "/models", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.5)
    raise RuntimeError("llama_cpp.server did not start")


def evaluated_counts(log: Path) -> list[int]:
    """Prompt tokens each request evaluated, in order, from a verbose server log."""
    return [int(n) for n in EVAL_LINE.findall(log.read_text(errors="replace"))]
