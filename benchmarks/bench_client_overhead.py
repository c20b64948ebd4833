"""veriscale's own cost per HTTP call, against an instant local server (tests/support/fault_server.py).

    PYTHONPATH=. python benchmarks/bench_client_overhead.py [--verdicts 20]

Raw: the same request bodies posted with a plain httpx client. Ours: ``Verifier.compare`` with a
fresh SQLite store (prompt building, retries wrapper, store commits, parsing, aggregation). With
a server that answers instantly, the difference is all client-side overhead.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import sys

import httpx

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "src")]
from tests.support.fault_server import FaultServer  # noqa: E402
from veriscale.engine.store import Store  # noqa: E402
from veriscale.models.uri import load_backend  # noqa: E402
from veriscale.verify.reward import Verifier  # noqa: E402

TASK, A, B = "task " * 300, "first answer " * 150, "second answer " * 150


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--verdicts", type=int, default=20)
    args = ap.parse_args()
    with FaultServer() as srv:
        model = load_backend(srv.url + "?concurrency=1#fault-model")
        bodies: list = []
        original = model._post
        model._post = lambda path, body: (bodies.append((path, body)), original(path, body))[1]
        Verifier(model, store=None, concurrency=1).compare(TASK, A, B)
        model._post = original
        client = httpx.Client()
        start = time.perf_counter()
        for _ in range(args.verdicts):
            for path, body in bodies:
                client.post(srv.url + path, json=body).json()
        raw = (time.perf_counter() - start) / (args.verdicts * len(bodies))
        with tempfile.TemporaryDirectory() as d:
            start = time.perf_counter()
            for i in range(args.verdicts):
                Verifier(model, store=Store.open(Path(d) / f"s{i}.sqlite3"), concurrency=1).compare(TASK, A, B)
            ours = (time.perf_counter() - start) / (args.verdicts * len(bodies))
    print(json.dumps({"calls_per_verdict": len(bodies), "raw_ms_per_call": raw * 1e3,
                      "ours_ms_per_call": ours * 1e3, "overhead_ms_per_call": (ours - raw) * 1e3}, indent=2))


if __name__ == "__main__":
    main()
