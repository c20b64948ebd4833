"""Controller curves: the cost controller (``--budget``) against a fixed schedule of equal cost.

    python benchmarks/bench_budget.py                      # oracle (400 pools, N = 5 and 8) + 1 dev pool, embedded
    python benchmarks/bench_budget.py --dev-pools 0        # the simulated oracle only (about a minute)
    python benchmarks/bench_budget.py --model http://127.0.0.1:8080/v1#smollm2 --dev-pools 3

At budgets of 0.25×, 0.5× and 1× the calls of full PPT (k = 2 pivots, C = 3 criteria, both
slots per criterion: 6 calls per comparison), each row gives top-1 accuracy and mean model calls
for the controller (``BudgetController``) and for the fixed schedule the same budget buys
(``fixed_schedule``: PPT with the k ≤ 2 pivots and first c ≤ 3 criteria that cost the most within
it). The oracle is ``tests.support.budget_sim``: per-criterion qualities (a shared part plus
a per-criterion part), the truly best candidate has the highest mean. The dev pools are seeded
Terminal-Bench pools with disagreement (``$VERISCALE_DEV_DATA``), judged by the real verifier
(``--model``, default the embedded model) with the agent criteria; each decision gets its own
fresh store, so its calls are what it would cost cold; top-1 = the pick is a passing run.
Prints one JSON object.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))  # tests.support: the simulated judges

from _common import dev_file  # noqa: E402
from veriscale.selection.budget.controller import BudgetController  # noqa: E402
from tests.support.budget_sim import SimulatedCriteriaJudge, criteria_qualities, fixed_schedule  # noqa: E402
from veriscale.selection.core.schedules import ppt_comparison_count  # noqa: E402
from veriscale.selection.core.tournament import ppt  # noqa: E402

FRACTIONS = (0.25, 0.5, 1.0)
K_FULL, C_FULL = 2, 3


def oracle_rows(n: int, pools: int, noise: float, joint: bool) -> list[dict]:
    per = 1 if joint else 2 * C_FULL
    full = ppt_comparison_count(n, K_FULL) * per
    rows = []
    for fraction in FRACTIONS:
        budget = int(full * fraction)
        hits = {"controller": 0, "fixed": 0}
        calls = {"controller": 0, "fixed": 0}
        schedule = None
        for seed in range(pools):
            q = criteria_qualities(n, C_FULL, seed=10_000 + seed)
            judge = SimulatedCriteriaJudge(q, seed=seed, noise=noise, joint=joint)
            outcome = BudgetController(f"calls={budget}", n_criteria=C_FULL, seed=seed).run(n, judge)
            hits["controller"] += outcome.result.winner == judge.best
            calls["controller"] += judge.calls
            fixed = SimulatedCriteriaJudge(q, seed=seed, noise=noise, joint=joint)
            schedule = fixed_schedule(n, budget, fixed.comparison_calls, k_max=K_FULL, n_criteria=C_FULL)
            if schedule is not None:
                k, c = schedule
                hits["fixed"] += ppt(n, fixed.on_criteria(c), k=k, seed=seed).winner == fixed.best
                calls["fixed"] += fixed.calls
        rows.append(_row(n, fraction, budget, full, pools, hits, calls, schedule))
    return rows


def _row(n, fraction, budget, full, pools, hits, calls, schedule) -> dict:
    top1 = {m: round(hits[m] / pools, 3) for m in hits}
    return {"n": n, "fraction": fraction, "budget_calls": budget, "full_ppt_calls": full, "pools": pools,
            "fixed_schedule": None if schedule is None else {"k": schedule[0], "criteria": schedule[1]},
            "top1_controller": top1["controller"], "top1_fixed": top1["fixed"],
            "calls_controller": round(calls["controller"] / pools, 1), "calls_fixed": round(calls["fixed"] / pools, 1),
            "met": top1["controller"] >= top1["fixed"]}


def dev_rows(model_uri: str, n_pools: int, seed: int, render_tokens: int | None) -> dict:
    from veriscale.bench.datasets import load_labelled_pools, sample
    from veriscale.engine.store import Store
    from veriscale.models.uri import load_backend
    from veriscale.selection.select import select
    from veriscale.selection.settings import SelectionSettings

    pools = [p for p in load_labelled_pools([dev_file("terminal_bench_2.1_trials.jsonl.gz")]) if p.disagrees]
    chosen = sample(pools, n_pools, seed)
    model = load_backend(model_uri)
    rows: list[dict] = []
    started = time.perf_counter()
    for fraction in FRACTIONS:
        hits = {"controller": 0, "fixed": 0}
        calls = {"controller": 0, "fixed": 0}
        schedules = []
        for p in chosen:
            n = len(p.candidates)
            full = ppt_comparison_count(n, K_FULL) * 2 * C_FULL
            budget = int(full * fraction)
            k, c = fixed_schedule(n, budget, lambda c: 2 * c, k_max=K_FULL, n_criteria=C_FULL) or (1, 1)
            schedules.append({"task": p.task_id, "n": n, "budget_calls": budget, "k": k, "criteria": c})
            for method, settings in (
                    ("controller", SelectionSettings(criteria="agent", seed=seed, budget=f"calls={budget}",
                                                     budget_tokens=render_tokens)),
                    ("fixed", SelectionSettings(criteria="agent", seed=seed, k=k, adaptive=False,
                                                budget_tokens=render_tokens))):
                crits = settings.criteria_set()
                if method == "fixed":
                    crits = crits.only([i.name for i in crits.items[:c]])
                with tempfile.TemporaryDirectory() as cold:
                    store = Store.open(Path(cold) / "store.sqlite3")
                    verifier = settings.verifier(model, store=store)
                    verifier.criteria = crits
                    sel = select(p.task, p.candidates, verifier=verifier, settings=settings)
                    store.close()
                hits[method] += p.labels[sel.index] > 0
                calls[method] += sel.usage.model_calls
                print(f"dev {p.task_id} x{fraction} {method}: picked {'a passing' if p.labels[sel.index] > 0 else 'a failing'}"
                      f" run, {sel.usage.model_calls} calls, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        rows.append({"fraction": fraction, "pools": len(chosen), "schedules": schedules,
                     "top1_controller": round(hits["controller"] / len(chosen), 3),
                     "top1_fixed": round(hits["fixed"] / len(chosen), 3),
                     "calls_controller": round(calls["controller"] / len(chosen), 1),
                     "calls_fixed": round(calls["fixed"] / len(chosen), 1),
                     "met": hits["controller"] >= hits["fixed"]})
    return {"model": model.uri, "tasks": [p.task_id for p in chosen], "tasks_with_disagreement": len(pools),
            "wall_s": round(time.perf_counter() - started, 1), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=400, help="simulated pools per size and budget")
    parser.add_argument("--sizes", default="5,8", help="simulated pool sizes N")
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--joint", action="store_true", help="price the oracle as joint scoring (1 call a slot order)")
    parser.add_argument("--dev-pools", type=int, default=1, help="Terminal-Bench pools with disagreement (0: skip)")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--render-tokens", type=int, default=None,
                        help="render budget per candidate on the dev pools (default: select's own)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out: dict = {"command": " ".join(["python", "benchmarks/bench_budget.py", *sys.argv[1:]]),
                 "cpus": os.cpu_count(), "load_1min_before": round(os.getloadavg()[0], 2)}
    started = time.perf_counter()
    out["oracle"] = [row for n in map(int, args.sizes.split(",")) for row in oracle_rows(n, args.pools, args.noise,
                                                                                         args.joint)]
    out["oracle_wall_s"] = round(time.perf_counter() - started, 1)
    if args.dev_pools:
        out["dev"] = dev_rows(args.model, args.dev_pools, args.seed, args.render_tokens)
    out["all_met"] = all(r["met"] for r in out["oracle"]) and all(r["met"] for r in out.get("dev", {}).get("rows", []))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
