"""Cost and top-1 accuracy of Best-of-N tournaments on a SIMULATED judge (no model calls).

For each pool size N and method, run ``--pools`` seeded pools: true qualities ~ N(0, 1); the
judge returns σ((q_i − q_j)/τ) + Gaussian noise (``--noise``), clipped to [0, 1]. Reports mean
comparisons and judge calls per decision, judge calls saved by adaptive mode versus the same
method's non-adaptive plan, top-1 accuracy (the truly best candidate was picked), mean reported
confidence, and accuracy among decisions reported with confidence ≥ ``--min-confidence``::

    python benchmarks/bench_tournament_cost.py                 # table
    python benchmarks/bench_tournament_cost.py --json out.json # table + JSON
"""

from __future__ import annotations

import os

# Tiny matrices: BLAS threads only add contention, so pin them before numpy loads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # tests.support: the simulated judges
_sys.path.insert(1, str(_Path(__file__).resolve().parents[1] / "src"))

from tests.support.selection_sim import NoisyPreferenceOracle, random_qualities  # noqa: E402
from veriscale.selection.core.tournament import TournamentResult, knockout, ppt, round_robin  # noqa: E402

Method = Callable[[int, NoisyPreferenceOracle, int], TournamentResult]


def methods(n: int, min_confidence: float) -> list[tuple[str, Method]]:
    """The rows benchmarked for pool size ``n``."""
    rows: list[tuple[str, Method]] = [
        ("round_robin (2 slot orders)", lambda n, o, s: round_robin(n, o, seed=s)),
        (
            "round_robin adaptive",
            lambda n, o, s: round_robin(n, o, seed=s, adaptive=True, min_confidence=min_confidence),
        ),
    ]
    for k in range(1, min(4, n) + 1):
        rows.append((f"ppt k={k}", lambda n, o, s, k=k: ppt(n, o, k=k, seed=s)))
        rows.append(
            (
                f"ppt k={k} adaptive",
                lambda n, o, s, k=k: ppt(n, o, k=k, seed=s, adaptive=True, min_confidence=min_confidence),
            )
        )
    rows.append(("knockout (2 slot orders)", lambda n, o, s: knockout(n, o, seed=s)))
    return rows


def run(
    sizes: list[int], pools: int, noise: float, temperature: float, seed: int, min_confidence: float
) -> list[dict]:
    """Benchmark every method at every size; one dict per (size, method)."""
    rows = []
    for n in sizes:
        for name, method in methods(n, min_confidence):
            started = time.perf_counter()
            comparisons, calls, saved, correct, confidence = [], [], [], [], []
            for pool in range(pools):
                pool_seed = seed * 100_003 + pool
                oracle = NoisyPreferenceOracle(
                    random_qualities(n, pool_seed), temperature=temperature, noise=noise, seed=pool_seed
                )
                result = method(n, oracle, pool_seed)
                comparisons.append(result.n_comparisons)
                calls.append(result.n_judgements)
                saved.append(result.judgements_saved)
                correct.append(result.winner == oracle.best)
                confidence.append(result.confidence)
            correct_arr, conf_arr = np.array(correct), np.array(confidence)
            sure = conf_arr >= min_confidence
            rows.append(
                {
                    "data": "simulated",
                    "n": n,
                    "method": name,
                    "pools": pools,
                    "comparisons": float(np.mean(comparisons)),
                    "judge_calls": float(np.mean(calls)),
                    "judge_calls_saved": float(np.mean(saved)),
                    "top1_accuracy": float(correct_arr.mean()),
                    "mean_confidence": float(conf_arr.mean()),
                    "share_confident": float(sure.mean()),
                    "accuracy_when_confident": float(correct_arr[sure].mean()) if sure.any() else None,
                    "seconds": round(time.perf_counter() - started, 2),
                }
            )
    return rows


def print_table(rows: list[dict], args: argparse.Namespace) -> None:
    print(
        f"SIMULATED judge: qualities ~ N(0,1), P = sigmoid(dq/{args.temperature}) + N(0, {args.noise}^2) clipped; "
        f"{args.pools} seeded pools per row; confident = confidence >= {args.min_confidence}"
    )
    header = (
        f"{'data':9} {'N':>3} {'method':28} {'comps':>7} {'calls':>7} {'saved':>7} "
        f"{'top1':>6} {'conf':>6} {'%conf':>6} {'acc|conf':>8}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        sure = "-" if r["accuracy_when_confident"] is None else f"{r['accuracy_when_confident']:.3f}"
        print(
            f"{r['data']:9} {r['n']:>3} {r['method']:28} {r['comparisons']:7.1f} {r['judge_calls']:7.1f} "
            f"{r['judge_calls_saved']:7.1f} {r['top1_accuracy']:6.3f} {r['mean_confidence']:6.3f} "
            f"{r['share_confident']:6.2f} {sure:>8}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 8, 20])
    parser.add_argument("--pools", type=int, default=200)
    parser.add_argument("--noise", type=float, default=0.1, help="std of Gaussian noise added to P(i beats j)")
    parser.add_argument("--temperature", type=float, default=0.5)
    parser.add_argument("--min-confidence", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON to PATH")
    args = parser.parse_args()
    rows = run(args.sizes, args.pools, args.noise, args.temperature, args.seed, args.min_confidence)
    print_table(rows, args)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"settings": vars(args), "rows": rows}, handle, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
