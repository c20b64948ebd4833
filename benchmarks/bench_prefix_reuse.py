"""Prompt tokens processed per pairwise verdict (C=3, K=2) on the embedded model,
with and without prefix KV reuse.

    python benchmarks/bench_prefix_reuse.py --pairs 5 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

from _common import dev_pairs

from veriscale.models.embedded import EmbeddedModel
from veriscale.verify.reward import Verifier


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    model = EmbeddedModel.load()
    v = Verifier(model, store=None, criteria="general", repeats=2)  # C=3, both slot orders
    rows = {}
    for reuse in (False, True):
        model.reuse_prefix = reuse
        tokens, calls, start = 0, 0, time.perf_counter()
        for p in dev_pairs(args.pairs):
            res = v.compare(p["instruction"], p["output_1"], p["output_2"])
            tokens += res.usage.processed_prompt_tokens  # what the embedded model evaluated after KV reuse
            calls += res.usage.model_calls
        rows["reuse" if reuse else "no_reuse"] = {
            "prompt_tokens_per_verdict": tokens / args.pairs, "calls_per_verdict": calls / args.pairs,
            "seconds_per_verdict": (time.perf_counter() - start) / args.pairs}
    ratio = rows["no_reuse"]["prompt_tokens_per_verdict"] / rows["reuse"]["prompt_tokens_per_verdict"]
    speed = rows["no_reuse"]["seconds_per_verdict"] / rows["reuse"]["seconds_per_verdict"]
    out = {"pairs": args.pairs, "criteria": 3, "repeats": 2, **rows,
           "token_ratio_without_over_with": ratio, "time_ratio_without_over_with": speed}
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
