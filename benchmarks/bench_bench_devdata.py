"""Bench numbers on the dev data: pairwise accuracy/ties/SNR (continuous vs discrete) and Best-of-N.

    python3 benchmarks/bench_bench_devdata.py                       # embedded, small subsample
    python3 benchmarks/bench_bench_devdata.py --model http://127.0.0.1:8080/v1#smollm2 --pairs 30 --pools 5

Uses the same code as ``veriscale bench`` (``veriscale.bench``) with a persistent store
(``--store``, default ``/tmp/veriscale-bench-devdata.sqlite3``), so a rerun resumes and the
discrete rows reuse the continuous rows' calls. Prints one JSON object: settings, the load
average, and per section the rows (metrics, calls, prompt tokens, wall seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from _common import dev_file  # noqa: E402
from veriscale.bench.datasets import load_labelled_pools, load_pairs, sample  # noqa: E402
from veriscale.bench.bench_runner import Bench, BenchConfig, expand_configs  # noqa: E402
from veriscale.engine.store import Store  # noqa: E402
from veriscale.models.uri import load_backend  # noqa: E402



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--store", default="/tmp/veriscale-bench-devdata.sqlite3")
    parser.add_argument("--pairs", type=int, default=6, help="dev pairs in the seeded subsample (0: skip)")
    parser.add_argument("--pools", type=int, default=1, help="Terminal-Bench tasks with disagreement (0: skip)")
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    model = load_backend(args.model)
    store = Store.open(args.store)
    out: dict = {"model": model.uri, "seed": args.seed, "load_1min_before": round(os.getloadavg()[0], 2),
                 "cpus": os.cpu_count()}
    configs = expand_configs(BenchConfig(k=args.k), {}, discrete_vs_continuous=True)
    if args.pairs:
        pairs = sample(load_pairs(dev_file("pairwise_dev.jsonl")), args.pairs, args.seed)
        bench = Bench(model, store, criteria="general", seed=args.seed)
        started = time.perf_counter()
        rows = bench.run_pairs(pairs, configs)
        out["pairs"] = {"n": len(pairs), "wall_s": round(time.perf_counter() - started, 1),
                        "rows": [r.to_dict() for r in rows]}
    if args.pools:
        pools = [p for p in load_labelled_pools([dev_file("terminal_bench_2.1_trials.jsonl.gz")]) if p.disagrees]
        chosen = sample(pools, args.pools, args.seed)
        bench = Bench(model, store, criteria="agent", seed=args.seed)
        started = time.perf_counter()
        rows = bench.run_pools(chosen, configs)
        out["pools"] = {"tasks": [p.task_id for p in chosen], "tasks_with_disagreement": len(pools),
                        "wall_s": round(time.perf_counter() - started, 1), "rows": [r.to_dict() for r in rows]}
    out["load_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
