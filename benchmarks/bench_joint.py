"""Joint vs separate scoring on the dev pairs: agreement, accuracy, calls, tokens; and how much
later joint slots depend on the grade written before them.

    python3 benchmarks/bench_joint.py                         # embedded, 24 seeded dev pairs, general criteria
    python3 benchmarks/bench_joint.py --pairs 60 --model http://127.0.0.1:8080/v1?template=chatml#smollm2

Each pair is compared both ways (K = 2 slot orders, C = 3 criteria): separately (2·2·C = 12 calls)
and jointly (2 calls), all separate pairs first, then all joint ones, so no pair's KV prefix
helps its own other mode. Agreement: the same pick (P > 0.5, < 0.5, or a tie) and mean |ΔP|;
accuracy against the pair's label (a tie counts half). On the embedded model a third pass writes
the runner-up label instead of the argmax before each next header (no store: the written label
is not part of the request) and reports mean |Δ expectation| of the later slots and mean |ΔP|.
Prints one JSON object; the store (``--store``) caches every call, so a rerun resumes.
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

from _common import Progress, dev_file  # noqa: E402
from veriscale.bench.datasets import load_pairs, sample  # noqa: E402
from veriscale.engine.store import Store  # noqa: E402
from veriscale.models.uri import load_backend  # noqa: E402
from veriscale.verify.reward import Verifier  # noqa: E402



def pick(p: float | None) -> float:
    """1 (the first output), 2, or 1.5 (a tie or no verdict)."""
    if p is None or abs(p - 0.5) < 1e-9:
        return 1.5
    return 1.0 if p > 0.5 else 2.0


def run_mode(model, store, pairs, criteria: str, joint: bool, tau: float) -> dict:
    v = Verifier(model, store=store, criteria=criteria, joint=joint, tau=tau)
    started = time.perf_counter()
    rows = []
    tick = Progress(f"joint {'on' if joint else 'off'}", len(pairs), "pair")
    for pair in pairs:
        res = v.compare(pair.instruction, pair.output_1, pair.output_2)
        tick()
        rows.append({"id": pair.id, "label": pair.label, "p": res.p_a_wins, "failed": res.failed,
                     "values": {(r.criterion, r.repeat, r.candidate): r.value for r in res.readings},
                     "first": {(r.criterion, r.repeat, r.candidate) for r in res.readings  # each call's first slot
                               if r.slot in ("A", None) and r.criterion == v.criteria.items[0].name},
                     "sent": sum(r.prompt_tokens_total for r in res.readings),
                     "alone": sum("re-asked alone" in n for n in res.notes)})
    u = v.usage
    return {"rows": rows, "calls": u.model_calls, "cache_hits": u.cache_hits, "prompt_tokens_processed": u.prompt_tokens,
            "prompt_tokens_sent": sum(r["sent"] for r in rows), "completion_tokens": u.completion_tokens,
            "wall_s": round(time.perf_counter() - started, 1), "slots_re_asked_alone": sum(r["alone"] for r in rows)}


def accuracy(rows) -> float:
    return sum(1.0 if pick(r["p"]) == r["label"] else 0.5 if pick(r["p"]) == 1.5 else 0.0 for r in rows) / len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--store", default="/tmp/veriscale-bench-joint.sqlite3")
    parser.add_argument("--pairs", type=int, default=24)
    parser.add_argument("--criteria", default="general")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tau", type=float, default=0.1, help="fixed, so both modes map rewards to P alike")
    parser.add_argument("--no-dependence", action="store_true", help="skip the runner-up-written pass")
    args = parser.parse_args()

    model = load_backend(args.model)
    store = Store.open(args.store)
    pairs = sample(load_pairs(dev_file("pairwise_dev.jsonl")), args.pairs, args.seed)
    out: dict = {"model": model.uri, "pairs": len(pairs), "criteria": args.criteria, "seed": args.seed,
                 "tau": args.tau, "cpus": os.cpu_count(), "load_1min_before": round(os.getloadavg()[0], 2)}
    sep = run_mode(model, store, pairs, args.criteria, False, args.tau)
    joint = run_mode(model, store, pairs, args.criteria, True, args.tau)
    both = [(s, j) for s, j in zip(sep["rows"], joint["rows"]) if not s["failed"] and not j["failed"]]
    out["separate"] = {k: v for k, v in sep.items() if k != "rows"} | {"accuracy": round(accuracy(sep["rows"]), 3)}
    out["joint"] = {k: v for k, v in joint.items() if k != "rows"} | {"accuracy": round(accuracy(joint["rows"]), 3)}
    out["agreement"] = {
        "pairs_compared": len(both),
        "same_pick": round(sum(pick(s["p"]) == pick(j["p"]) for s, j in both) / len(both), 3),
        "mean_abs_dP": round(sum(abs(s["p"] - j["p"]) for s, j in both) / len(both), 4),
    }
    for key in ("calls", "prompt_tokens_processed", "prompt_tokens_sent"):
        out["agreement"][f"{key}_ratio_joint_over_separate"] = round(joint[key] / max(1, sep[key]), 3)
    if getattr(model, "is_embedded", False) and not args.no_dependence:
        model.joint_written_rank = 1  # the runner-up label is written before each next header
        try:
            other = run_mode(model, None, pairs, args.criteria, True, args.tau)
        finally:
            model.joint_written_rank = 0
        deltas, dps = [], []
        for j, o in zip(joint["rows"], other["rows"]):
            later = [k for k in j["values"] if k not in j["first"] and j["values"][k] is not None
                     and o["values"].get(k) is not None]
            deltas += [abs(j["values"][k] - o["values"][k]) for k in later]
            if j["p"] is not None and o["p"] is not None:
                dps.append(abs(j["p"] - o["p"]))
        out["written_label_dependence"] = {
            "later_slots": len(deltas), "mean_abs_d_expectation": round(sum(deltas) / max(1, len(deltas)), 4),
            "max_abs_d_expectation": round(max(deltas, default=0.0), 4),
            "mean_abs_dP": round(sum(dps) / max(1, len(dps)), 4),
            "same_pick": round(sum(pick(j["p"]) == pick(o["p"]) for j, o in zip(joint["rows"], other["rows"]))
                               / len(pairs), 3)}
    out["load_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
