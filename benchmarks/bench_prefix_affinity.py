"""Prompt tokens two llama.cpp servers of one model actually process: prefix affinity vs
round-robin routing of the same pairwise verdicts (target >= 1.5x fewer with affinity).

    python benchmarks/bench_prefix_affinity.py --pairs 6 [--json out.json]

Each routing gets two fresh ``python -m llama_cpp.server`` processes (so neither inherits the
other's KV cache) started with ``--verbose true``; the tokens each request really evaluated are
read from the servers' own log (``llama_perf_context_print: prompt eval time = ... / N tokens``,
which follows the ``Llama.generate: N prefix-match hit, remaining M prompt tokens`` line when
the prefix cache hit). The verdicts are the same calls through the same gateway; only
``EndpointPool(routing=...)`` differs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

from _common import dev_pairs, evaluated_counts, start_verbose_server

from veriscale.engine.sync_facade import CallExecutor
from veriscale.engine.routing import EndpointPool
from veriscale.models.openai_compat import OpenAICompatModel
from veriscale.verify.prompts import PROMPT_VERSION
from veriscale.verify.reward import Verifier

def _start(log: Path) -> tuple[subprocess.Popen, str]:
    return start_verbose_server(log, "--n_threads", "1")


def _evaluated(log: Path) -> int:
    return sum(evaluated_counts(log))


def run(routing: str, pairs: list[dict], tmp: Path) -> dict:
    logs = [tmp / f"{routing}-{i}.log" for i in range(2)]
    servers = [_start(log) for log in logs]
    try:
        warm = [_evaluated(log) for log in logs]  # startup evaluates nothing, but be exact
        pool = EndpointPool([OpenAICompatModel(url, model="smollm2", concurrency=1) for _, url in servers],
                            concurrency=1, routing=routing)
        verifier = Verifier(pool, store=None, criteria="agent", repeats=2)
        calls = [c for p in pairs for c in verifier.plan_compare(p["instruction"], p["output_1"], p["output_2"])[0]]
        executor = CallExecutor(pool, None, prompt_version=PROMPT_VERSION, concurrency=1)
        started = time.perf_counter()
        outcomes = executor.run(calls)
        wall = time.perf_counter() - started
        assert all(o.response is not None for o in outcomes), [o.error for o in outcomes if o.error]
        time.sleep(0.5)
        per_server = [_evaluated(log) - w for log, w in zip(logs, warm)]
        return {"routing": routing, "calls": len(calls), "evaluated_prompt_tokens": sum(per_server),
                "per_server": per_server, "served": [e.served for e in pool.endpoints], "wall_s": round(wall, 1),
                "prompt_tokens_sent": sum(o.response.prompt_tokens_total for o in outcomes)}
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--json")
    args = ap.parse_args()
    pairs = dev_pairs(args.pairs, max_chars=2500)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run("affinity", pairs, Path(tmp)), run("round_robin", pairs, Path(tmp))]
    result = {"rows": rows, "ratio_round_robin_over_affinity": round(
        rows[1]["evaluated_prompt_tokens"] / max(1, rows[0]["evaluated_prompt_tokens"]), 2)}
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
