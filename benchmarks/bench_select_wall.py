"""Wall time of the README's main job: Best-of-5 on the bundled Terminal-Bench pool, embedded model.

    python3 benchmarks/bench_select_wall.py                 # default settings, fresh store
    python3 benchmarks/bench_select_wall.py --budget 320 --k 1 --no-adaptive --json

Each run uses a fresh temporary store (nothing cached), so it measures the cold path a new user
sees. Reported: wall time (model load separate), model calls, prompt tokens actually processed
(after prefix reuse), the pick and whether its trial passed, and the 1-minute load average
before and after (other processes on the machine slow the embedded model down).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from veriscale.data.pool import load_selection  # noqa: E402
from veriscale.engine.store import Store  # noqa: E402
from veriscale.models.embedded import EmbeddedModel  # noqa: E402
from veriscale.selection.select import select  # noqa: E402
from veriscale.verify.reward import Verifier  # noqa: E402

POOL = REPO / "examples" / "terminal_bench" / "merge-diff-arc-agi-task.jsonl"


def run_once(budget: int | None, k: int, adaptive: bool, method: str, criteria: str) -> dict:
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    model = EmbeddedModel.load()
    loaded = time.perf_counter()
    task, candidates = load_selection([POOL])
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "store.sqlite3")
        verifier = Verifier(model, store=store, criteria=criteria)
        processed_before = model.tokens_processed
        sel = select(task, candidates, verifier=verifier, method=method, k=k, adaptive=adaptive,
                     budget_tokens=budget)
        store.close()
    finished = time.perf_counter()
    return {
        "method": method, "k": k, "adaptive": adaptive, "criteria": criteria,
        "budget_tokens": sel.plan.budget_tokens,
        "wall_s": round(finished - loaded, 2), "model_load_s": round(loaded - started, 2),
        "model_calls": sel.usage.model_calls, "n_comparisons": sel.n_comparisons,
        "n_judgements": sel.n_judgements, "calls_saved": sel.calls_saved, "stop": sel.stop_reason,
        "prompt_tokens_processed": model.tokens_processed - processed_before,
        "pick": sel.best.id, "pick_passed": sel.best.labels.get("reward"), "confidence": sel.confidence,
        "load_1min_before": round(load_before, 2), "load_1min_after": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=None, help="render budget per candidate (default: select's)")
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--method", default="ppt")
    parser.add_argument("--criteria", default="agent")
    parser.add_argument("--no-adaptive", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    row = run_once(args.budget, args.k, not args.no_adaptive, args.method, args.criteria)
    if args.json:
        print(json.dumps(row))
    else:
        for key, value in row.items():
            print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
