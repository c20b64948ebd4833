"""The README's first job timed for two commits side by side (alternating runs, fresh stores).

    python3 benchmarks/bench_readme_commits.py f1b386d HEAD --runs 3      # A B A B A B, medians, ratio
    python3 benchmarks/bench_readme_commits.py f1b386d WORKTREE --stub    # counts and Python cost only
    python3 benchmarks/bench_readme_commits.py f1b386d HEAD --json out.json
    python3 benchmarks/bench_readme_commits.py HEAD WORKTREE --stub --select-args '--budget-tokens 1024'

Each commit is ``git archive``d into a temporary folder (``WORKTREE``: this checkout's ``src``)
and every run is a fresh process running ``veriscale select
examples/terminal_bench/merge-diff-arc-agi-task.jsonl`` in process (the CLI's own entry point)
with ``$VERISCALE_STORE`` in a new temporary folder, so nothing is cached. The pool is this
checkout's (the same file for both commits). Per run it reports the wall time of the command
(model load included), the embedded model's score calls, the prompt tokens each call sent and
evaluated (the rest came from the KV prefix), the whitespace-path extra evaluations, the time
spent inside llama.cpp's ``eval`` and the process's CPU time; then the medians and B / A.

The token counts, calls and whitespace evaluations do not depend on machine load; the times do
(the 1-minute load average is reported before each run). ``--stub`` replaces llama.cpp's
evaluation with a no-op (fixed logits: every label equally likely, so every comparison is a tie)
so the process's CPU time is the orchestration cost of the job (Python: planning, prompts,
store, gateway), independent of the model.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POOL = REPO / "examples" / "terminal_bench" / "merge-diff-arc-agi-task.jsonl"

CHILD = r'''
import json, os, time
import numpy as np
import llama_cpp
import veriscale.models.embedded as E

stats = {"calls": 0, "sent": [], "evaluated": [], "ws_evals": 0, "eval_s": 0.0}
stub = os.environ["BENCH_STUB"] == "1"
real_eval = llama_cpp.Llama.eval

def timed_eval(self, tokens):
    t = time.perf_counter()
    if stub:
        self.input_ids[self.n_tokens:self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)
    else:
        real_eval(self, tokens)
    stats["eval_s"] += time.perf_counter() - t

llama_cpp.Llama.eval = timed_eval
if stub:
    E.EmbeddedModel._last_logits = lambda self: np.zeros(self._n_vocab)
real_ws = E.EmbeddedModel._add_after_whitespace

def counted_ws(self, *args, **kwargs):
    n = real_ws(self, *args, **kwargs)
    stats["ws_evals"] += n
    return n

E.EmbeddedModel._add_after_whitespace = counted_ws
SCORE = "_score" if hasattr(E.EmbeddedModel, "_score") else "score"
real_score = getattr(E.EmbeddedModel, SCORE)

def counted_score(self, request, *args, **kwargs):
    before, ws = self.tokens_processed, stats["ws_evals"]
    resp = real_score(self, request, *args, **kwargs)
    stats["calls"] += 1
    stats["sent"].append(resp.prompt_tokens_total)
    stats["evaluated"].append(self.tokens_processed - before - (stats["ws_evals"] - ws))
    return resp

setattr(E.EmbeddedModel, SCORE, counted_score)
from veriscale.cli import app
cpu0, t0 = time.process_time(), time.perf_counter()
try:
    app(["select", os.environ["BENCH_POOL"], *json.loads(os.environ["BENCH_ARGS"])], standalone_mode=False)
except SystemExit:
    pass
stats["wall_s"], stats["cpu_s"] = time.perf_counter() - t0, time.process_time() - cpu0
stats["tokens_processed"] = sum(m.tokens_processed for m in E._LOADED.values())
with open(os.environ["BENCH_OUT"], "w") as f:
    json.dump(stats, f)
'''


def tree(commit: str, into: Path) -> Path:
    """The ``src`` folder of ``commit`` (``WORKTREE``: this checkout's own)."""
    if commit == "WORKTREE":
        return REPO / "src"
    folder = into / commit
    folder.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder / "src"


def run_once(src: Path, stub: bool, select_args: list[str]) -> dict:
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stats.json"
        env = dict(os.environ, PYTHONPATH=str(src), VERISCALE_STORE=str(Path(tmp) / "store.sqlite3"),
                   BENCH_POOL=str(POOL), BENCH_OUT=str(out), BENCH_STUB="1" if stub else "0",
                   BENCH_ARGS=json.dumps(select_args))
        done = subprocess.run([sys.executable, "-c", CHILD], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, cwd=tmp)
        if done.returncode or not out.exists():
            sys.exit(f"the run with {src} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        stats = json.loads(out.read_text())
    sent, evaluated = stats.pop("sent"), stats.pop("evaluated")
    # mean position (KV length) at an evaluated token: attention's share of the cost grows with it
    positions = sum(e * (2 * s - e + 1) / 2 for s, e in zip(sent, evaluated))
    return {**stats, "mean_position_evaluated": round(positions / max(1, sum(evaluated)), 1), "prompt_tokens_sent": sum(sent), "prompt_tokens_evaluated": sum(evaluated),
            "sent_per_call": round(sum(sent) / max(1, len(sent)), 1),
            "evaluated_per_call": round(sum(evaluated) / max(1, len(evaluated)), 1),
            "kv_reused": sum(sent) - sum(evaluated), "load_1min_before": round(load, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="first commit (e.g. f1b386d)")
    parser.add_argument("b", help="second commit (e.g. HEAD, or WORKTREE for this checkout)")
    parser.add_argument("--runs", type=int, default=2, help="runs per commit, alternated A B A B ...")
    parser.add_argument("--stub", action="store_true", help="no model: counts and Python function calls only")
    parser.add_argument("--select-args", default="", help="more arguments of veriscale select, e.g. '--budget-tokens 1024'")
    parser.add_argument("--json", type=Path, help="also write every run and the summary here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"A": tree(args.a, Path(tmp)), "B": tree(args.b, Path(tmp))}
        runs = []
        for i in range(args.runs):
            for side in ("A", "B"):
                row = {"side": side, "commit": args.a if side == "A" else args.b, "run": i + 1,
                       **run_once(trees[side], args.stub, shlex.split(args.select_args))}
                runs.append(row)
                print(json.dumps(row), flush=True)
    summary = {}
    for side in ("A", "B"):
        mine = [r for r in runs if r["side"] == side]
        summary[side] = {key: statistics.median(r[key] for r in mine)
                         for key in ("wall_s", "cpu_s", "eval_s", "calls", "prompt_tokens_sent",
                                     "prompt_tokens_evaluated", "ws_evals", "mean_position_evaluated")}
    summary["ratio_b_over_a"] = {key: round(summary["B"][key] / summary["A"][key], 3) if summary["A"][key] else None
                                 for key in summary["A"]}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
