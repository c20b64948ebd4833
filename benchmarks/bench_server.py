"""``veriscale serve``: job throughput through the REST API vs the Python API against a
zero-latency endpoint, and the dashboard's page load and live-update latency with a large store.

    python benchmarks/bench_server.py [--jobs 200] [--workers 1 4] [--rounds 5] [--runs 10000]
                                      [--steps 5000] [--repeats 5] [--live 20] [--skip-browser]
                                      [--json out.json]

One run on this machine; never part of the test suite. Three parts:

1. **Throughput, REST vs Python.** The endpoint is ``tests/support/fault_server.py`` in its own
   process (an OpenAI-compatible server that answers every call at once with logprobs), loaded
   as ``load_backend("<url>#fault-model")``. The same ``--jobs`` score verdicts (criteria
   ``general``: 3 model calls each, every candidate distinct so nothing is a cache hit, a fresh
   store for each side) are (a) posted one by one to ``POST /api/jobs`` of the real server app
   (uvicorn in this process, ``tests/support/dashboard.py``, ``--workers`` job threads) and
   waited for until every job is done, timed from the first POST to the last job's
   ``finished_at``; and (b) called from Python in a loop, ``veriscale.score(task, candidate,
   model=model, store=store)`` (a ``Verifier`` per call, like the job). Reported: jobs/s each
   way (median of ``--rounds`` rounds, the sides alternating which goes first), REST/Python, and
   the REST jobs' median time from POST to done (queueing included). What the REST side adds
   per verdict: an HTTP request with pydantic validation, a ``jobs`` row inserted and updated three times (running, run id, done), a
   ``runs`` row started and finished, a ``calls`` event and a ``status`` event, the worker
   queue hand-off, and the client's polling of ``GET /api/jobs`` (every 0.2 s); the Python side
   does the same model calls and ``calls``/``run_calls`` commits but records no run.
2. **Page load.** A temp store is filled with ``--runs`` finished runs (90 % ``select`` runs
   with an 8-candidate ranking, ``best`` and ``confidence``, the rest ``track`` runs with a
   10-point curve) plus one ``track`` run whose trajectory has ``--steps`` steps
   (``RunLog.record_steps``) and as many progress points (``point`` events and the result's
   curve). Headless Chromium (Playwright, ``/usr/bin/chromium``) then times, ``--repeats`` times
   each from a blank page (median reported): ``#/runs`` until ``body[data-ready="1"]`` shows
   run rows; the trajectory viewer until the first ``step-row`` is visible, then scrolling to
   the last step until it is rendered, and how many ``step-row`` elements the DOM holds there
   (virtualised: must be < 1000); the big run's progress page until its ``curve`` is visible
   (and until all its ``curve-point`` circles are drawn). Next to each, the same API requests
   the page makes, timed with httpx (API-only).
3. **Live update.** A ``track`` run with status ``running`` is open on its progress page; the
   benchmark process (its own store connection, like a CLI in another terminal) emits a
   ``point`` event and times until the page has one more ``curve-point`` (browser clock via a
   MutationObserver, same machine clock as ``time.time()``). Repeated ``--live`` times with a
   random 0-0.2 s pause before each emit so emits fall at random phases of the server's store
   poll (``stream.POLL_S`` = 0.2 s): expect a median of ~0.1-0.3 s. Done twice: on a run with a
   few points, and on one that already has ``--steps`` points (each point redraws the chart).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.support.dashboard

from _common import wait_models  # noqa: E402  (benchmarks/ is this script's folder)
from tests.support.dashboard import dashboard
from veriscale.api import score
from veriscale.data.model import Step
from veriscale.engine.run_log import RunLog
from veriscale.engine.store import Store
from veriscale.models.uri import load_backend

TASK = "Write a shell command that prints the number of lines in notes.txt, and explain it in one sentence."
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"]
TRAJECTORY = "agent-run-5000"


def candidates(n: int, tag: str) -> list[str]:
    return [f"[{tag} {i}] Use `wc -l < notes.txt`: wc counts newline characters, and reading from stdin "
            f"keeps the file name out of the output (variant {i * 7919 % 10007})." for i in range(n)]


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def p90(xs: list[float]) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.9 * (len(s) - 1)))]


# -- the endpoint ---------------------------------------------------------------------------------

@contextmanager
def endpoint() -> Iterator[str]:
    """``tests/support/fault_server.py`` in a subprocess (its threads do not share our GIL): its /v1 URL."""
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "support" / "fault_server.py")],
                            stdout=subprocess.PIPE, text=True, cwd=str(REPO))
    try:
        url = f"http://127.0.0.1:{int(proc.stdout.readline())}/v1"
        wait_models(url)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def fault_backend(url: str) -> Any:
    return load_backend(url + "#fault-model")


# -- part 1: throughput ---------------------------------------------------------------------------

def python_side(url: str, cands: list[str], tmp: Path) -> dict[str, Any]:
    model = fault_backend(url)
    store = Store.open(tmp / "python.sqlite3")
    for c in candidates(3, "warm-py"):
        score(TASK, c, model=model, store=store)
    started = time.perf_counter()
    rewards = [score(TASK, c, model=model, store=store) for c in cands]
    elapsed = time.perf_counter() - started
    assert all(r.reward is not None and r.usage.cache_hits == 0 for r in rewards), "a Python-side verdict failed"
    calls = store.count_calls("ok")
    store.close()
    return {"jobs": len(cands), "seconds": elapsed, "jobs_per_s": len(cands) / elapsed, "calls_ok": calls}


def rest_side(url: str, cands: list[str], tmp: Path, workers: int) -> dict[str, Any]:
    model = fault_backend(url)
    with dashboard(tmp / f"rest-w{workers}.sqlite3", model, workers=workers) as d:
        with d.client() as c:
            for cand in candidates(3, f"warm-rest-{workers}"):
                d.wait(d.submit("score", {"task": TASK, "candidate": cand})["id"])
            started_wall, started = time.time(), time.perf_counter()
            ids = []
            for cand in cands:
                r = c.post("/api/jobs", json={"kind": "score", "params": {"task": TASK, "candidate": cand}})
                assert r.status_code == 201, r.text
                ids.append(r.json()["id"])
            submitted = time.perf_counter() - started
            wanted = set(ids)
            while True:
                jobs = [j for j in c.get("/api/jobs", params={"limit": 1000}).json()["jobs"] if j["id"] in wanted]
                if len(jobs) == len(ids) and all(j["status"] not in ("queued", "running") for j in jobs):
                    break
                time.sleep(0.2)  # the end time is the jobs' finished_at: polling only has to notice it
            observed = time.perf_counter() - started
        bad = [j for j in jobs if j["status"] != "done"]
        assert not bad, f"{len(bad)} REST jobs did not finish: {bad[0]}"
        elapsed = max(j["finished_at"] for j in jobs) - started_wall
        latency = [j["finished_at"] - j["created_at"] for j in jobs]
        calls = d.store.count_calls("ok")
    return {"jobs": len(ids), "workers": workers, "seconds": elapsed, "jobs_per_s": len(ids) / elapsed,
            "submit_s": submitted, "observed_s": observed, "median_job_latency_s": median(latency),
            "calls_ok": calls}


def throughput(url: str, n_jobs: int, workers_list: list[int], rounds: int, tmp: Path) -> list[dict[str, Any]]:
    rows = []
    for workers in workers_list:
        rest, py = [], []
        for r in range(rounds):  # alternate which side goes first; new candidates and stores every round
            cands = candidates(n_jobs, f"w{workers} round {r}")
            for side in ("python", "rest") if r % 2 == 0 else ("rest", "python"):
                if side == "python":
                    py.append(python_side(url, cands, tmp / f"py-w{workers}-{r}"))
                else:
                    rest.append(rest_side(url, cands, tmp / f"rest-{r}", workers))
        rest_rate = median([x["jobs_per_s"] for x in rest])
        py_rate = median([x["jobs_per_s"] for x in py])
        rows.append({"workers": workers, "rest_jobs_per_s": rest_rate, "python_jobs_per_s": py_rate,
                     "ratio": rest_rate / py_rate, "rest_median_job_latency_s": median([x["median_job_latency_s"] for x in rest]),
                     "rest": rest, "python": py})
    return rows


# -- part 2: populate a big store -----------------------------------------------------------------

def select_result(i: int, rng: random.Random) -> dict[str, Any]:
    n = 8
    scores = sorted((rng.random() for _ in range(n)), reverse=True)
    order = rng.sample(range(n), n)
    ranking = [{"rank": r + 1, "index": idx, "id": f"r{idx}", "score": s,
                "criteria": {"Correctness": s, "Helpfulness": min(1, s + 0.05), "Safety": 0.97}}
               for r, (idx, s) in enumerate(zip(order, scores))]
    comparisons = [{"i": a, "j": b, "p": rng.random()} for a in range(3) for b in range(a + 1, n)]
    return {"task": {"id": f"task-{i}", "text": f"Task {i}: fix the failing test in module m{i % 97}."},
            "method": "ppt", "index": order[0], "best": {"id": f"r{order[0]}", "index": order[0]},
            "confidence": 0.5 + rng.random() / 2, "min_confidence": 0.9, "decided": True,
            "reason": {"text": "the top candidate beat every pivot"}, "ranking": ranking, "ties": [],
            "n_comparisons": len(comparisons), "n_judgements": 2 * len(comparisons),
            "usage": {"model_calls": 6 * len(comparisons), "cache_hits": 0, "prompt_tokens": 9000 + i % 500},
            "tournament": {"comparisons": comparisons, "strengths": [rng.random() for _ in range(n)]},
            "stop_reason": "confident", "notes": []}


def curve(name: str, n: int, rng: random.Random, every: int = 1) -> dict[str, Any]:
    points, value = [], 0.1
    for k in range(1, n + 1):
        value = min(1.0, max(0.0, value + rng.uniform(-0.02, 0.025)))
        points.append({"step": k * every, "value": round(value, 4), "label_mass": round(rng.uniform(0.6, 1), 3)})
    return {"trajectory": name, "points": points, "events": [], "voc": round(rng.random(), 3), "n_steps": n * every,
            "outcome": None}


def trajectory_steps(n: int) -> list[Step]:
    steps = []
    for k in range(n):
        if k % 2 == 0:
            steps.append(Step("agent", f"Step {k}: run `pytest tests/test_mod{k % 50}.py -x -q` and read the failure.\n"
                                       f"I think the bug is in parse_line(), line {k % 300}."))
        else:
            failed = k % 97 == 1
            out = "\n".join(f"tests/test_mod{k % 50}.py::test_case_{j} {'FAILED' if failed and j == 2 else 'PASSED'}"
                            for j in range(6))
            steps.append(Step("tool", out + ("\nE   AssertionError: expected 3, got 4" if failed else ""),
                              exit_code=1 if failed else 0))
    return steps


def populate(path: Path, n_runs: int, n_steps: int) -> dict[str, Any]:
    rng = random.Random(0)
    store = Store.open(path)
    log = RunLog(store)
    started = time.perf_counter()
    model = "http://127.0.0.1:8000/v1#Qwen/Qwen3-8B"
    for i in range(n_runs):
        if i % 10 == 9:
            run_id = store.start_run("track", model, {"trajectory": [f"/data/runs/t{i}.jsonl"], "runs": 1, "every": 5})
            store.finish_run(run_id, "ok", {"curves": [curve(f"t{i}", 10, rng, every=5)], "voc_by_outcome": None})
        else:
            run_id = store.start_run("select", model, {"paths": [f"/data/pools/pool{i}.jsonl"], "task": None,
                                                       "method": "ppt", "k": 2, "criteria": "general"})
            store.finish_run(run_id, "ok" if i % 50 else "failed",
                             select_result(i, rng) if i % 50 else {"error": "the model server did not answer"})
    big = store.start_run("track", model, {"trajectory": ["/data/runs/agent.jsonl"], "runs": 1, "every": 1})
    log.record_steps(big, TRAJECTORY, trajectory_steps(n_steps), start=0)
    big_curve = curve(TRAJECTORY, n_steps, rng)
    for point in big_curve["points"]:
        log.emit(big, "point", {"trajectory": TRAJECTORY, "point": point})
    store.finish_run(big, "ok", {"curves": [big_curve], "voc_by_outcome": None})
    seconds = time.perf_counter() - started
    store.close()
    return {"runs": n_runs + 1, "steps": n_steps, "big_run": big, "populate_s": seconds,
            "store_mb": path.stat().st_size / 1e6}


# -- part 2: page load ----------------------------------------------------------------------------

def api_times(url: str, big: int, n_steps: int, repeats: int) -> dict[str, float]:
    requests = {
        "runs": [("/api/info", {}), ("/api/runs", {"offset": 0, "limit": 50})],
        "trajectory": [("/api/info", {}), (f"/api/runs/{big}/steps", {"trajectory": TRAJECTORY, "offset": 0, "limit": 200})],
        "trajectory_end": [(f"/api/runs/{big}/steps", {"trajectory": TRAJECTORY, "offset": ((n_steps - 1) // 200) * 200, "limit": 200})],
        "progress": [("/api/info", {}), (f"/api/runs/{big}", {}), (f"/api/runs/{big}/progress", {})],
    }
    out = {}
    with httpx.Client(base_url=url, timeout=60) as c:
        for name, reqs in requests.items():
            times = []
            for _ in range(repeats + 1):
                t = time.perf_counter()
                for path, params in reqs:
                    r = c.get(path, params=params)
                    assert r.status_code == 200, (path, r.status_code, r.text[:200])
                times.append(time.perf_counter() - t)
            out[name] = median(times[1:])  # the first is a warm-up
    return out


def page_loads(page: Any, url: str, big: int, n_steps: int, repeats: int) -> dict[str, Any]:
    def timed(target: str, selector: str) -> float:
        page.goto("about:blank")
        t = time.perf_counter()
        page.goto(url + target)
        page.wait_for_selector(selector, state="visible", timeout=120_000)
        return time.perf_counter() - t

    runs, traj, scroll, rows_at_end, prog, prog_points, total_text = [], [], [], [], [], [], ""
    for _ in range(repeats):
        runs.append(timed("/#/runs", 'body[data-ready="1"] [data-testid=run-row]'))
        total_text = page.inner_text("[data-testid=runs-total]")

        traj.append(timed(f"/#/runs/{big}/trajectory/{TRAJECTORY}", "[data-testid=step-row]"))
        t = time.perf_counter()
        page.eval_on_selector("[data-testid=trajectory-viewport]", "el => { el.scrollTop = el.scrollHeight; }")
        page.wait_for_function(
            "last => { const el = document.querySelector(`[data-testid=step-row][data-index=\"${last}\"]`);"
            " return el && !el.classList.contains('loading'); }", arg=n_steps - 1, timeout=60_000)
        scroll.append(time.perf_counter() - t)
        rows_at_end.append(page.locator("[data-testid=step-row]").count())

        t = time.perf_counter()
        prog.append(timed(f"/#/runs/{big}", "[data-testid=curve]"))
        page.wait_for_function("n => document.querySelectorAll('[data-testid=curve-point]').length >= n",
                               arg=n_steps, timeout=120_000)
        prog_points.append(time.perf_counter() - t)
    return {"runs_page_s": median(runs), "runs_total_text": total_text,
            "trajectory_first_row_s": median(traj), "trajectory_scroll_to_end_s": median(scroll),
            "step_rows_in_dom_at_end": max(rows_at_end), "progress_curve_s": median(prog),
            "progress_all_points_s": median(prog_points), "curve_points": page.locator("[data-testid=curve-point]").count(),
            "samples": {"runs": runs, "trajectory": traj, "scroll": scroll, "progress": prog, "progress_points": prog_points}}


# -- part 3: live update --------------------------------------------------------------------------

OBSERVE = """() => {
  window.__counts = [];
  const count = () => document.querySelectorAll('[data-testid=curve-point]').length;
  window.__last = count();
  new MutationObserver(() => {
    const n = count();
    if (n !== window.__last) { window.__last = n; window.__counts.push([n, Date.now()]); }
  }).observe(document.getElementById('app'), { childList: true, subtree: true });
}"""


def live_latency(page: Any, url: str, store_path: Path, repeats: int, initial: int, name: str) -> dict[str, Any]:
    rng = random.Random(1)
    store = Store.open(store_path)
    log = RunLog(store)
    run_id = store.start_run("track --follow", "bench", {"trajectory": ["live"], "runs": 1})
    start_curve = curve(name, initial, rng)
    for point in start_curve["points"]:
        log.emit(run_id, "point", {"trajectory": name, "point": point})
    page.goto("about:blank")
    page.goto(f"{url}/#/runs/{run_id}")
    page.wait_for_selector('body[data-ready="1"] [data-testid=progress-page]', timeout=120_000)
    page.wait_for_selector("[data-testid=live]", timeout=30_000)
    page.wait_for_function("n => document.querySelectorAll('[data-testid=curve-point]').length >= n", arg=initial,
                           timeout=120_000)
    time.sleep(0.5)  # let the EventSource connect
    page.evaluate(OBSERVE)
    latencies, observed = [], []
    try:
        for k in range(repeats):
            before = page.evaluate("() => window.__last")
            time.sleep(rng.uniform(0, 0.2))
            emitted, t = time.time(), time.perf_counter()
            log.emit(run_id, "point", {"trajectory": name, "point": {"step": initial + k + 1, "value": rng.random(),
                                                                     "label_mass": 0.9}})
            page.wait_for_function("n => window.__last > n", arg=before, timeout=30_000, polling=10)
            observed.append(time.perf_counter() - t)
            seen = next(ms for n, ms in page.evaluate("() => window.__counts") if n > before)
            latencies.append(seen / 1000 - emitted)
    finally:
        store.finish_run(run_id, "ok", {"curves": [], "voc_by_outcome": None})
        store.close()
    return {"initial_points": initial, "repeats": repeats, "median_s": median(latencies), "p90_s": p90(latencies),
            "max_s": max(latencies), "observed_median_s": median(observed), "samples": latencies}


def browser_parts(url: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    path = tmp / "big.sqlite3"
    filled = populate(path, args.runs, args.steps)
    print(f"store: {filled['runs']:,} runs, {args.steps:,}-step trajectory, {filled['store_mb']:.1f} MB, "
          f"filled in {filled['populate_s']:.1f} s", flush=True)
    with dashboard(path, fault_backend(url), workers=1) as d:
        api = api_times(d.url, filled["big_run"], args.steps, args.repeats)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True)
            try:
                page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                loads = page_loads(page, d.url, filled["big_run"], args.steps, args.repeats)
                live_small = live_latency(page, d.url, path, args.live, 5, "live")
                live_big = live_latency(page, d.url, path, max(5, args.live // 2), args.steps, "live-big")
            finally:
                browser.close()
    return {"store": filled, "api_only": api, "browser": loads, "live": live_small, "live_big": live_big,
            "page_errors": errors}


# -- report ---------------------------------------------------------------------------------------

def report(out: dict[str, Any]) -> None:
    if out["throughput"]:
        _report_throughput(out)
    _report_browser(out)


def _report_throughput(out: dict[str, Any]) -> None:
    print(f"\nthroughput: {out['args']['jobs']} score jobs (3 calls each) against a zero-latency endpoint, "
          f"median of {out['args']['rounds']} rounds")
    print(f"{'workers':>8} {'REST jobs/s':>12} {'Python jobs/s':>14} {'REST/Python':>12} {'REST submit->done':>18}")
    for row in out["throughput"]:
        print(f"{row['workers']:>8} {row['rest_jobs_per_s']:>12.1f} {row['python_jobs_per_s']:>14.1f} "
              f"{row['ratio']:>12.2f} {row['rest_median_job_latency_s']:>17.2f}s")


def _report_browser(out: dict[str, Any]) -> None:
    b = out.get("browser_parts")
    if not b:
        return
    br, api = b["browser"], b["api_only"]
    print(f"\npage load with {b['store']['runs']:,} runs and a {b['store']['steps']:,}-step trajectory "
          f"(median of {out['args']['repeats']})")
    print(f"{'page':<36} {'browser s':>10} {'API only s':>11}")
    print(f"{'#/runs (first 50 rows)':<36} {br['runs_page_s']:>10.3f} {api['runs']:>11.3f}")
    print(f"{'trajectory viewer, first step row':<36} {br['trajectory_first_row_s']:>10.3f} {api['trajectory']:>11.3f}")
    print(f"{'trajectory, scroll to last step':<36} {br['trajectory_scroll_to_end_s']:>10.3f} {api['trajectory_end']:>11.3f}")
    print(f"{'progress page, curve visible':<36} {br['progress_curve_s']:>10.3f} {api['progress']:>11.3f}")
    print(f"{'progress page, all points drawn':<36} {br['progress_all_points_s']:>10.3f}")
    print(f"step rows in the DOM at the end: {br['step_rows_in_dom_at_end']}  (runs total shown: "
          f"{br['runs_total_text']!r}; curve points: {br['curve_points']})")
    print("\nlive update: point emitted -> one more curve-point in the page (server polls every 0.2 s)")
    for key in ("live", "live_big"):
        lv = b[key]
        print(f"  chart with {lv['initial_points']:>5} points: median {lv['median_s']:.3f} s, p90 {lv['p90_s']:.3f} s, "
              f"max {lv['max_s']:.3f} s (n={lv['repeats']})")
    if b["page_errors"]:
        print(f"page errors: {b['page_errors'][:3]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200, help="score jobs per side")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 4], help="server job worker threads to try")
    ap.add_argument("--rounds", type=int, default=5, help="throughput rounds per worker count (median reported)")
    ap.add_argument("--runs", type=int, default=10_000, help="finished runs in the page-load store")
    ap.add_argument("--steps", type=int, default=5_000, help="steps (and progress points) of the big trajectory")
    ap.add_argument("--repeats", type=int, default=5, help="page loads per page (median reported)")
    ap.add_argument("--live", type=int, default=20, help="live-update samples")
    ap.add_argument("--skip-browser", action="store_true", help="only the throughput part")
    ap.add_argument("--skip-throughput", action="store_true", help="only the browser parts")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()

    out: dict[str, Any] = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory() as tmp, endpoint() as url:
        if not args.skip_throughput:
            out["throughput"] = throughput(url, args.jobs, args.workers, args.rounds, Path(tmp))
        else:
            out["throughput"] = []
        if not args.skip_browser:
            out["browser_parts"] = browser_parts(url, args, Path(tmp))
    report(out)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
