"""Wall time of the README's main job: Best-of-5 on the bundled Terminal-Bench pool, embedded model.

    python3 benchmarks/bench_select_wall.py                 # default settings, fresh store
    python3 benchmarks/bench_select_wall.py --budget 320 --k 1 --no-adaptive --json

    python3 benchmarks/bench_select_wall.py --count-tokens --budget 320 --k 1 --no-adaptive

Each run uses a fresh temporary store (nothing cached), so it measures the cold path a new user
sees. Reported: wall time (model load separate), model calls, prompt tokens actually processed
(after prefix reuse), the pick and whether its trial passed, and the 1-minute load average
before and after (other processes on the machine slow the embedded model down).

``--count-tokens`` does not run the network: a stand-in backend tokenizes every prompt with the
embedded model's tokenizer and counts the tokens its KV-cache prefix reuse would process, and
answers with a fixed label distribution (so every comparison is a tie). Use it to compare the
cost of settings independently of machine load; with adaptive mode the real model's answers
change the schedule, so count non-adaptive plans.
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
from veriscale.models.base import ScoreResponse  # noqa: E402
from veriscale.models.chat_template import render_chat  # noqa: E402
from veriscale.models.embedded import EmbeddedModel  # noqa: E402
from veriscale.selection.select import select  # noqa: E402
from veriscale.verify.reward import Verifier  # noqa: E402

POOL = REPO / "examples" / "terminal_bench" / "merge-diff-arc-agi-task.jsonl"


class PrefixTokenCounter:
    """Stand-in backend: counts the prompt tokens the embedded model's prefix reuse would process."""

    is_embedded = True

    def __init__(self, model: EmbeddedModel) -> None:
        self.model = model
        self.uri = "token-counter"
        self.display_name = "token counter"
        self.tokens_processed = 0
        self._previous: list[int] = []

    def fingerprint(self) -> str:
        return "token-counter:" + self.model.fingerprint()

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    def context_size(self) -> int:
        return self.model.context_size()

    def single_token_labels(self, labels):
        return []

    def score(self, request) -> ScoreResponse:
        prompt = render_chat(self.model.template, request.messages, request.prefill)
        tokens = self.model._llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        common = 0
        for a, b in zip(self._previous, tokens[:-1]):
            if a != b:
                break
            common += 1
        self.tokens_processed += len(tokens) - common
        self._previous = tokens
        flat = {lab: 1.0 / len(request.labels) for lab in request.labels}
        return ScoreResponse(label_probs=flat, label_mass=1.0, prompt_tokens=len(tokens) - common,
                             prompt_tokens_total=len(tokens))


def run_once(budget: int | None, k: int, adaptive: bool, method: str, criteria: str,
             count_tokens: bool = False) -> dict:
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    model = EmbeddedModel.load()
    if count_tokens:
        model = PrefixTokenCounter(model)
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
    parser.add_argument("--count-tokens", action="store_true", help="count processed tokens only (no model run)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    row = run_once(args.budget, args.k, not args.no_adaptive, args.method, args.criteria, args.count_tokens)
    if args.count_tokens:
        row = {key: row[key] for key in ("method", "k", "adaptive", "criteria", "budget_tokens", "model_calls",
                                         "n_comparisons", "prompt_tokens_processed")} | {"simulated_judge": True}
    if args.json:
        print(json.dumps(row))
    else:
        for key, value in row.items():
            print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
