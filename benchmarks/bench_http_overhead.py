"""Verdicts per second through veriscale's HTTP backend vs raw requests with the same prompts
to the same local llama.cpp server (target ratio >= 0.95).

    python benchmarks/bench_http_overhead.py --pairs 4 --rounds 3 [--json out.json]

Both sides send identical request bodies one at a time, verdict by verdict, alternating which
side goes first, so server-side drift and other load affect both equally. "ours" includes prompt building, the
store (a fresh SQLite file per round, so nothing is served from cache), parsing and aggregation.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import httpx
from _common import dev_pairs, llama_server

from veriscale.engine.store import Store
from veriscale.models.embedded_files import default_gguf_path
from veriscale.models.uri import load_backend
from veriscale.verify.reward import Verifier


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    pairs = dev_pairs(args.pairs, max_chars=2000)
    with llama_server(str(default_gguf_path())) as url:
        model = load_backend(url + "?concurrency=1#smollm2")
        # capture the exact bodies our backend sends, once
        bodies: list[dict] = []
        original = model._post

        def capture(path, body):
            bodies.append((path, body))
            return original(path, body)

        model._post = capture
        Verifier(model, store=None, criteria="general", concurrency=1).compare(
            pairs[0]["instruction"], pairs[0]["output_1"], pairs[0]["output_2"])
        model._post = original
        bodies.clear()
        model._post = capture
        for p in pairs:
            Verifier(model, store=None, criteria="general", concurrency=1).compare(p["instruction"], p["output_1"], p["output_2"])
        model._post = original
        per_verdict = len(bodies) // len(pairs)

        client = httpx.Client(timeout=120)
        raw_s, ours_s = 0.0, 0.0
        by_pair = [bodies[i * per_verdict:(i + 1) * per_verdict] for i in range(len(pairs))]

        def raw(i: int) -> float:
            t = time.perf_counter()
            for path, body in by_pair[i]:
                client.post(url + path, json=body).json()["choices"][0]["logprobs"]
            return time.perf_counter() - t

        def ours(i: int) -> float:
            with tempfile.TemporaryDirectory() as d:
                v = Verifier(model, store=Store.open(Path(d) / "s.sqlite3"), criteria="general", concurrency=1)
                t = time.perf_counter()
                v.compare(pairs[i]["instruction"], pairs[i]["output_1"], pairs[i]["output_2"])
                return time.perf_counter() - t

        for r in range(args.rounds):  # verdict by verdict, alternating which side goes first
            for i in range(len(pairs)):
                if (r + i) % 2 == 0:
                    raw_s += raw(i)
                    ours_s += ours(i)
                else:
                    ours_s += ours(i)
                    raw_s += raw(i)
        verdicts = len(pairs) * args.rounds
    out = {"pairs": len(pairs), "rounds": args.rounds, "calls_per_verdict": per_verdict,
           "raw_verdicts_per_s": verdicts / raw_s, "ours_verdicts_per_s": verdicts / ours_s,
           "ratio_ours_over_raw": raw_s / ours_s}
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
