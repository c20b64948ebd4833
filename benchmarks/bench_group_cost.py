"""What ranking an RL reward group costs, and how well it ranks: round robin vs the sparse scheme.

A SIMULATED judge (no model calls, seconds on 2 cores): for each of ``--groups`` seeded groups
of ``--size`` completions, true qualities ~ N(0, 1) and a noisy pairwise judge
(:class:`tests.support.selection_sim.NoisyPreferenceOracle`: σ((q_i − q_j)/T) + Gaussian noise,
plus a slot-A bias). Each scheme ranks the group by Bradley–Terry over what it judged; Kendall τ
of that order against the true one, mean over groups with a bootstrap 95 % interval::

    python benchmarks/bench_group_cost.py                    # table (200 groups of 8)
    python benchmarks/bench_group_cost.py --json out.json    # table + JSON

Calls: a comparison is judged in both slot orders; joint scoring makes that 2 calls, separate
scoring 2·2·C (2 orders × 2 slots × C criteria, C = 3). The target (issue 20): for a group of 8,
at most 48 calls with joint scoring and |τ − τ_round_robin| ≤ 0.02.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # tests.support: the simulated judges
_sys.path.insert(1, str(_Path(__file__).resolve().parents[1] / "src"))

from tests.support.selection_sim import NoisyPreferenceOracle, kendall_tau, random_qualities  # noqa: E402
from veriscale.selection.core.sparse import sparse_ranking  # noqa: E402
from veriscale.selection.core.tournament import round_robin  # noqa: E402

CRITERIA = 3
TARGET_CALLS, TARGET_DELTA = 48, 0.02

SCHEMES = {
    "round_robin": lambda n, judge, seed: round_robin(n, judge, repeats=2, seed=seed),
    "sparse": lambda n, judge, seed: sparse_ranking(n, judge, seed=seed),
    "sparse, 1 pivot": lambda n, judge, seed: sparse_ranking(n, judge, seed=seed, pivots=1),
}


def bootstrap(values: np.ndarray, draws: int, seed: int) -> tuple[float, float]:
    """95 % percentile interval of the mean of ``values`` (seeded)."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(draws, len(values)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def run(size: int, groups: int, temperature: float, noise: float, slot_bias: float, seed: int,
        draws: int = 2000) -> dict:
    """Rank every group with every scheme; per scheme its cost and τ, and Δτ against round robin."""
    taus = {name: [] for name in SCHEMES}
    comparisons = {name: [] for name in SCHEMES}
    for g in range(groups):
        qualities = random_qualities(size, seed=seed * 100_003 + g)
        for name, scheme in SCHEMES.items():
            judge = NoisyPreferenceOracle(qualities, temperature=temperature, noise=noise, slot_bias=slot_bias,
                                          seed=seed * 100_003 + g)
            result = scheme(size, judge, g)
            taus[name].append(kendall_tau(result.strengths, qualities))
            comparisons[name].append(result.n_comparisons)
    base = np.asarray(taus["round_robin"])
    rows = {}
    for name in SCHEMES:
        tau, used = np.asarray(taus[name]), np.asarray(comparisons[name], dtype=float)
        delta = tau - base
        rows[name] = {
            "comparisons_mean": float(used.mean()), "comparisons_max": int(used.max()),
            "calls_joint_max": int(used.max()) * 2, "calls_separate_max": int(used.max()) * 2 * 2 * CRITERIA,
            "tau_mean": float(tau.mean()), "tau_ci95": bootstrap(tau, draws, seed),
            "delta_tau": float(delta.mean()), "delta_tau_ci95": bootstrap(delta, draws, seed + 1),
        }
    for row in rows.values():
        row["target_met"] = row["calls_joint_max"] <= TARGET_CALLS and abs(row["delta_tau"]) <= TARGET_DELTA
    return {"size": size, "groups": groups, "temperature": temperature, "noise": noise, "slot_bias": slot_bias,
            "seed": seed, "schemes": rows}


def table(report: dict) -> str:
    lines = [f"groups of {report['size']} x {report['groups']}, T = {report['temperature']}, noise = "
             f"{report['noise']}, slot bias = {report['slot_bias']}, seed {report['seed']}",
             "| scheme | comparisons (mean / max) | calls joint (max) | calls separate C=3 (max) | mean τ [95 % CI] "
             "| Δτ vs round robin [95 % CI] |", "|---|---|---|---|---|---|"]
    for name, r in report["schemes"].items():
        lo, hi = r["tau_ci95"]
        dlo, dhi = r["delta_tau_ci95"]
        lines.append(f"| {name} | {r['comparisons_mean']:.1f} / {r['comparisons_max']} | {r['calls_joint_max']} | "
                     f"{r['calls_separate_max']} | {r['tau_mean']:.3f} [{lo:.3f}, {hi:.3f}] | "
                     f"{r['delta_tau']:+.3f} [{dlo:+.3f}, {dhi:+.3f}] |")
    s = report["schemes"]["sparse"]
    lines.append(f"target (≤ {TARGET_CALLS} joint calls, |Δτ| ≤ {TARGET_DELTA}): "
                 f"{'met' if s['target_met'] else 'not met'} ({s['calls_joint_max']} calls, |Δτ| = "
                 f"{abs(s['delta_tau']):.3f})")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--temperature", type=float, nargs="+", default=[0.5, 1.0])
    parser.add_argument("--noise", type=float, nargs="+", default=[0.1, 0.2])
    parser.add_argument("--slot-bias", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the reports here")
    args = parser.parse_args()
    reports = [run(args.size, args.groups, temperature, noise, args.slot_bias, args.seed)
               for temperature in args.temperature for noise in args.noise]
    print("\n\n".join(table(r) for r in reports))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(reports, out, indent=2)


if __name__ == "__main__":
    main()
