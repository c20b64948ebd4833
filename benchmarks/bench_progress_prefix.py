"""Prompt tokens processed to track a T-step trajectory at every step, with and without prefix
reuse, for T = 10, 20, 40: on the embedded model and on a local llama.cpp server.

    python benchmarks/bench_progress_prefix.py [--steps 10,20,40] [--json out.json]

The trajectory is the first T steps of the longest Terminal-Bench dev trial (real agent steps).
Embedded: ``EmbeddedModel.reuse_prefix`` on vs off; the model reports the tokens it evaluated.
Server: one ``python -m llama_cpp.server --verbose true``; the tokens it evaluated per request
are read from its log (``prompt eval time = ... / N tokens``). Without reuse, a short unrelated
request is sent between checkpoints (as from another user of the server), so the next
checkpoint finds no shared prefix in the server's KV cache; only the checkpoints' own requests
are counted. The fitted exponent b of tokens ~ a * T^b says how the cost grows: about 1 with
reuse (linear), towards 2 without (each checkpoint re-reads the whole prefix).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from _common import dev_file, evaluated_counts, start_verbose_server

from veriscale.data.importers.atif import load as load_atif
from veriscale.engine.sync_facade import CallExecutor
from veriscale.models.base import Message, ScoreRequest
from veriscale.models.embedded import EmbeddedModel
from veriscale.models.openai_compat import OpenAICompatModel
from veriscale.progress.progress_judge import ProgressJudge
from veriscale.progress.prompt import PROGRESS_PROMPT_VERSION
from veriscale.progress.offline_track import plan_track

TASK = "Work in the repository you are given until its test suite passes; do not change the tests."
STEP_TOKENS, BUDGET = 60, 6000  # 40 steps fit without elision, so the layouts are comparable
UNRELATED = ScoreRequest(messages=(Message("user", "Say yes."),), prefill="", labels=("Yes", "No"))


def long_trial(min_steps: int):
    with gzip.open(dev_file("terminal_bench_2.1_trials.jsonl.gz"), "rt") as fh:
        for line in fh:
            cand = load_atif(json.loads(line))[0]
            if len(cand.trajectory.steps) >= min_steps:
                return cand.trajectory.steps
    raise SystemExit(f"no dev trial has {min_steps} steps")


def plans(model, steps, sizes):
    judge = ProgressJudge(model, step_tokens=STEP_TOKENS, budget_tokens=BUDGET)
    return judge, {t: plan_track(TASK, steps[:t], judge) for t in sizes}


def embedded_rows(steps, sizes) -> list[dict]:
    model = EmbeddedModel.load()
    judge, by_t = plans(model, steps, sizes)
    rows = []
    for reuse in (True, False):
        model.reuse_prefix = reuse
        for t, plan in by_t.items():
            executor = CallExecutor(model, None, prompt_version=PROGRESS_PROMPT_VERSION)
            model.score(UNRELATED)  # the previous T's prompts leave no shared prefix in the KV cache
            started = time.perf_counter()
            outcomes = executor.run(plan.calls)
            rows.append({"backend": "embedded", "reuse": reuse, "T": t, "checkpoints": len(plan.calls),
                         "prompt_tokens_processed": sum(o.response.prompt_tokens for o in outcomes),
                         "prompt_tokens_sent": sum(o.response.prompt_tokens_total for o in outcomes),
                         "wall_s": round(time.perf_counter() - started, 1)})
            print(rows[-1], file=sys.stderr)
    model.reuse_prefix = True
    return rows


def server_rows(steps, sizes, tmp: Path) -> list[dict]:
    log = tmp / "server.log"
    proc, url = start_verbose_server(log)
    rows = []
    try:
        model = OpenAICompatModel(url, model="smollm2", concurrency=1)
        judge, by_t = plans(model, steps, sizes)
        for reuse in (True, False):
            for t, plan in by_t.items():
                counted = []
                for call in plan.calls:
                    before = len(evaluated_counts(log))
                    if not reuse:  # another user's request in between: no shared prefix is left
                        httpx.post(url + "/completions", json={"model": "smollm2", "prompt": f"unrelated {t} {before}",
                                                                "max_tokens": 1}, timeout=120)
                        before += 1
                    executor = CallExecutor(model, None, prompt_version=PROGRESS_PROMPT_VERSION, concurrency=1)
                    assert executor.run([call])[0].response is not None
                    time.sleep(0.05)
                    evals = evaluated_counts(log)
                    counted.append(sum(evals[before:]))
                rows.append({"backend": "llama.cpp server", "reuse": reuse, "T": t, "checkpoints": len(plan.calls),
                             "prompt_tokens_processed": sum(counted)})
                print(rows[-1], file=sys.stderr)
                # separate the next T's first checkpoint from this run's last prompt
                httpx.post(url + "/completions", json={"model": "smollm2", "prompt": "reset", "max_tokens": 1}, timeout=120)
    finally:
        proc.terminate()
        proc.wait(10)
    return rows


def exponent(rows: list[dict]) -> float:
    ts = np.log([r["T"] for r in rows])
    ys = np.log([r["prompt_tokens_processed"] for r in rows])
    return round(float(np.polyfit(ts, ys, 1)[0]), 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", default="10,20,40")
    ap.add_argument("--skip-server", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = [int(x) for x in args.steps.split(",")]
    steps = long_trial(max(sizes))
    rows = embedded_rows(steps, sizes)
    if not args.skip_server:
        with tempfile.TemporaryDirectory() as tmp:
            rows += server_rows(steps, sizes, Path(tmp))
    fits = {}
    for backend in sorted({r["backend"] for r in rows}):
        for reuse in (True, False):
            group = [r for r in rows if r["backend"] == backend and r["reuse"] == reuse]
            fits[f"{backend}, {'with' if reuse else 'without'} reuse"] = exponent(group)
    result = {"step_tokens": STEP_TOKENS, "rows": rows, "fitted_exponent": fits}
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
