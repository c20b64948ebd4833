"""veriscale against llm-verifier 0.3.0, side by side in one run on one llama.cpp server and one pool.

One command, from a fresh clone (the first run builds the benchmark's own virtualenv,
``.bench-venv/``, with ``llm-verifier==0.3.0`` from PyPI; veriscale never depends on it)::

    python benchmarks/bench_vs_llm_verifier.py                  # veriscale separate and --joint, then llm-verifier
    python benchmarks/bench_vs_llm_verifier.py --veriscale-args= "--veriscale-args=--joint ?grammar=on"
    python benchmarks/bench_vs_llm_verifier.py --json out.json

Each ``--veriscale-args`` is one veriscale row: flags for ``veriscale`` itself, given before the
``select`` command (``--joint`` is one); a word starting with ``?`` is a model-URI option, e.g.
``?grammar=on``. Every row and llm-verifier run on the same server in one run, so the ratios
compare like with like.

Both tools judge the same held Terminal-Bench 2.1 pool with disagreement (five real trials of
``merge-diff-arc-agi-task``, three passing, from ../shared/data; a copy is
examples/terminal_bench/) on ONE ``python -m llama_cpp.server`` of the embedded SmolLM2-135M GGUF,
started with ``--verbose`` so its log states the prompt tokens each request really evaluated
(llama_cpp.server reports no cache counts in its replies). G = 20, K = 1, C = 3 (veriscale's
``agent`` criteria, given to llm-verifier as its criteria), k = 2; each tool at its defaults
otherwise. Both read the same amount of each candidate (``--budget-tokens``, default 256, the
embedded default of the README job): veriscale's render budget, and llm-verifier's own
Terminal-Bench trace formatter cut to head and tail at 4 characters a token (llm-verifier has no
budget of its own; uncut traces overflow the 8k window). llama_cpp.server does not report its
window, so veriscale's model URI says ``?context=8192``.

Reported per tool: HTTP calls, prompt tokens sent (the server's usage.prompt_tokens), prompt
tokens the server processed (its verbose log), completion tokens, wall time, the pick and whether
it passed; and veriscale's ratios against the issue-20 targets (with joint scoring: at most 1/3 of
llm-verifier's calls, 1/3 of its processed tokens, 1/5 of its wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EVAL_LINE, start_verbose_server  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
POOL = REPO / "examples" / "terminal_bench" / "merge-diff-arc-agi-task.jsonl"
VENV = REPO / ".bench-venv"
LLM_VERIFIER = "llm-verifier==0.3.0"
TARGETS = {"calls": 1 / 3, "processed": 1 / 3, "wall": 1 / 5}

# Runs inside .bench-venv: llm-verifier's own select() on the same trials, through an OpenAI client
# whose every HTTP request is counted. Reads a JSON job on stdin, writes one JSON line.
DRIVER = r'''
import json, sys, time
try:  # the HTTP client the installed openai SDK is built on (recent ones: httpx2)
    import httpx2 as httpx
except ImportError:
    import httpx
from openai import OpenAI
import llm_verifier
from llm_verifier.loaders import _tb_extract_problem, _tb_format_trace

job = json.load(sys.stdin)
requests, answered = [], []
began = time.perf_counter()
def progress(response):  # a line an answer on stderr: its free-text generations run for minutes
    answered.append(1)  # (it sends its requests from a thread pool: several wait at the server at once)
    print(f"llm-verifier: {len(answered)} answered of {len(requests)} sent, {time.perf_counter() - began:.0f} s",
          file=sys.stderr, flush=True)
client = OpenAI(base_url=job["url"], api_key="none", timeout=3600, max_retries=0,
                http_client=httpx.Client(timeout=3600, event_hooks={"request": [lambda r: requests.append(str(r.url))],
                                                                    "response": [progress]}))
trials = [json.loads(line) for line in open(job["pool"]) if line.strip()]
steps = trials[0]["trajectory"].get("steps", [])
problem = _tb_extract_problem(steps, trials[0]["task_name"])
cut = job["trace_chars"]
def clip(text):
    return text if len(text) <= cut else text[: cut // 2] + "\n...\n" + text[-(cut // 2):]
traces = [clip(_tb_format_trace(t["trajectory"])) for t in trials]
llm_verifier.USAGE.reset()
start = time.perf_counter()
res = llm_verifier.select(problem, traces, criteria=job["criteria"], n_evaluations=1, pivots=2, seed=0,
                          client=client, model=job["model"], progress=False)
wall = time.perf_counter() - start
u = llm_verifier.USAGE.snapshot()
print(json.dumps({"wall_s": wall, "http_calls": sum(1 for r in requests if r.endswith("/chat/completions")),
                  "usage_calls": u["calls"], "prompt_tokens": u["input_tokens"],
                  "cached_prompt_tokens": u["cached_input_tokens"], "completion_tokens": u["output_tokens"],
                  "pick": res.index, "comparisons": res.n_comparisons, "version": llm_verifier.__version__,
                  "scores": res.scores}))
'''


def ensure_venv() -> Path:
    """``.bench-venv/bin/python`` with llm-verifier 0.3.0 (created once, with pip from PyPI)."""
    python = VENV / "bin" / "python"
    probe = [str(python), "-c", "import llm_verifier, sys; sys.exit(llm_verifier.__version__ != '0.3.0')"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", LLM_VERIFIER], check=True)
    return python


def processed_since(log: Path, offset: int) -> tuple[int, int, int]:
    """(prompt tokens evaluated, requests that evaluated, new offset) from the server log after ``offset``."""
    data = log.read_bytes()
    counts = [int(n) for n in EVAL_LINE.findall(data[offset:].decode("utf-8", "replace"))]
    return sum(counts), len(counts), len(data)


def agent_criteria() -> list[dict]:
    from veriscale.verify.criteria import load_criteria

    return [{"id": c.name.lower(), "name": c.name, "description": c.description} for c in load_criteria("agent").items]


def run_veriscale(url: str, store: Path, variant: list[str], budget_tokens: int) -> dict:
    options = "".join("&" + word[1:] for word in variant if word.startswith("?"))
    flags = [word for word in variant if not word.startswith("?")]
    cmd = [sys.executable, "-m", "veriscale", *flags, "select", str(POOL), "--budget-tokens", str(budget_tokens),
           "--model", url + f"?context=8192{options}#smollm2", "--scale", "letters:20", "--repeats", "1", "--criteria", "agent", "--pivots", "2", "--json", "--store", str(store)]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    wall = time.perf_counter() - start
    if done.returncode not in (0, 4):
        raise SystemExit(f"veriscale select failed ({done.returncode}): {done.stderr[-2000:]}")
    out = json.loads(done.stdout)
    u = out["usage"]
    return {"wall_s": wall, "http_calls": u["model_calls"] + u.get("failed_calls", 0), "prompt_tokens": u["prompt_tokens_sent"],
            "completion_tokens": u["completion_tokens"], "pick": out["ranking"][0]["index"],
            "comparisons": out["n_comparisons"], "reported_processed": u.get("prompt_tokens_processed")}


def run_llm_verifier(python: Path, url: str, trace_chars: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(DRIVER)
    job = {"url": url, "pool": str(POOL), "criteria": agent_criteria(), "model": "smollm2", "trace_chars": trace_chars}
    done = subprocess.run([str(python), f.name], input=json.dumps(job), stdout=subprocess.PIPE, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})  # stderr: its progress
    os.unlink(f.name)
    if done.returncode != 0:
        raise SystemExit(f"llm-verifier failed ({done.returncode}): its error is printed above")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--veriscale-args", action="append",
                    help='one veriscale row: flags for veriscale before its select command, e.g. "--joint" (repeatable; '
                         'default: one row separate, one --joint)')
    ap.add_argument("--budget-tokens", type=int, default=256,
                    help="what each tool reads of a candidate: veriscale's --budget-tokens, and llm-verifier's trace "
                         "cut to 4 characters a token (head + tail); 256 is veriscale's embedded default")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args()
    variants = args.veriscale_args if args.veriscale_args is not None else ["", "--joint"]
    python = ensure_venv()
    rewards = [json.loads(line)["reward"] for line in POOL.read_text().splitlines() if line.strip()]
    names = [json.loads(line)["trial_name"] for line in POOL.read_text().splitlines() if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        proc, url = start_verbose_server(log)
        try:
            _, _, offset = processed_since(log, 0)
            rows = {}
            for i, variant in enumerate(variants):
                row = run_veriscale(url, Path(tmp) / f"store-{i}.sqlite3", shlex.split(variant), args.budget_tokens)
                row["processed_tokens"], row["evaluating_requests"], offset = processed_since(log, offset)
                rows["veriscale" + (f" {variant}" if variant else " (separate)")] = row
                print(f"veriscale {variant or '(separate)'}: {row['http_calls']} calls, {row['processed_tokens']:,} "
                      f"processed, {row['wall_s']:.1f} s", flush=True)
                if args.json:  # a partial file: llm-verifier's free-text generations can take long
                    args.json.write_text(json.dumps({"rows": rows, "partial": True}, indent=2))
            lv = run_llm_verifier(python, url, 4 * args.budget_tokens)
            lv["processed_tokens"], lv["evaluating_requests"], offset = processed_since(log, offset)
        finally:
            proc.terminate()  # uvicorn finishes the requests in flight first: kill it if it takes long
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    veriscale_rows = dict(rows)
    rows["llm-verifier 0.3.0"] = lv
    print(f"pool {POOL.name}: N = {len(rewards)}, rewards {rewards}; G = 20, K = 1, C = 3, k = 2; "
          f"{args.budget_tokens} tokens a candidate (llm-verifier: {4 * args.budget_tokens} characters)")
    print(f"{'tool':<28}{'calls':>7}{'sent':>10}{'processed':>11}{'completion':>12}{'wall s':>9}  pick")
    for name, r in rows.items():
        pick = names[r["pick"]]
        print(f"{name:<28}{r['http_calls']:>7}{r['prompt_tokens']:>10,}{r['processed_tokens']:>11,}"
              f"{r['completion_tokens']:>12,}{r['wall_s']:>9.1f}  {pick} (reward {rewards[r['pick']]})")
    ratios = {}
    for name, vs in veriscale_rows.items():
        ratios[name] = {"calls": vs["http_calls"] / max(1, lv["http_calls"]),
                        "processed": vs["processed_tokens"] / max(1, lv["processed_tokens"]),
                        "wall": vs["wall_s"] / max(1e-9, lv["wall_s"])}
        for key, value in ratios[name].items():
            print(f"{name}: ratio {key} {value:.3f} (target <= {TARGETS[key]:.3f} with joint scoring: "
                  f"{'met' if value <= TARGETS[key] else 'not met'})")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "ratios": ratios, "targets": TARGETS, "rewards": rewards,
                                         "trials": names, "budget_tokens": args.budget_tokens}, indent=2))


if __name__ == "__main__":
    main()
