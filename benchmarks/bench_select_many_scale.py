"""``select-many`` at scale: decisions per second of the asyncio executor against Ray on one node,
the driver's memory as decisions pile up, and the store's size, in one run on one machine
(issue 32's scaling benchmark; run on demand, never in CI).

    python benchmarks/bench_select_many_scale.py                          # 5,200 tasks, local,ray1,ray2,ray4
    python benchmarks/bench_select_many_scale.py --tasks 50               # a smoke run
    python benchmarks/bench_select_many_scale.py --tasks 1000 --configs local,ray2 --json out.json
    python benchmarks/bench_select_many_scale.py --tasks 300 --configs ray2 --profile   # where Ray's time goes

The pool: 26,000 simulated rollouts (5,200 tasks x Best-of-5, seeded, chat transcripts with a
``task_id``, short answers of varied words) in one JSONL file in a temp folder. The model: three
zero-latency OpenAI-compatible endpoints (``benchmarks/zero_latency_endpoint.py``, a benchmark
double, each its own process) given as three endpoints of one model, the way ``--model`` takes
them repeated (an ``EndpointPool``). What is measured is veriscale's own side: the selection,
the gateway, the store, and for Ray the tasks, the streaming of every call back and the desk's
cluster-wide slots.

Each configuration runs in its own Python process (so its memory and its Ray instance are its
own), built the way ``veriscale select-many`` builds it (settings, verifier, store, a
``select-many`` parent run), with a fresh store each:

* ``local``: :class:`~veriscale.many.executors.LocalExecutor`, ``--tasks-at-once`` decisions on one loop;
* ``rayW``: :class:`~veriscale.many.executors.RayExecutor` on a local Ray instance started with
  ``num_cpus=W`` (each decision is a Ray task of one CPU, so W decisions run at once, one a worker),
  the same ``--tasks-at-once`` handed to Ray.

Per configuration: decisions/s over the whole run (from the first task handed out; Ray's start is
timed apart) and after decision ``--rss-at`` (steady state), model calls, the driver's RSS at
decision ``--rss-at`` and at the last one (growth %), the store's bytes (SQLite file + WAL), and
the CPU seconds of each group of processes (driver, Ray workers, Ray's own daemons, endpoints).
``--profile`` adds one instrumented Ray run: the driver's and the workers' profiles (cProfile of
the decision thread) and micro-timings of the Ray round trips a decision makes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from zero_latency_endpoint import MODEL_ID, start_endpoints, stats, stop_endpoints  # noqa: E402

RESULTS = HERE / "results_select_many_scale_2026-12-04.json"
WORDS = ("fix", "patch", "the", "parser", "returns", "None", "when", "input", "is", "empty", "added", "test",
         "refactor", "loop", "cache", "index", "off", "by", "one", "error", "handle", "timeout", "retry",
         "merge", "branch", "conflict", "resolved", "file", "missing", "import", "updated", "docs", "build",
         "passes", "fails", "on", "windows", "path", "separator", "unicode", "decode", "bytes", "checked")


# -- the pool ---------------------------------------------------------------------------------------

def write_pool(path: Path, tasks: int, runs: int, seed: int) -> None:
    """``tasks`` x ``runs`` chat rollouts with a ``task_id``, short answers of seeded random words."""
    rng = random.Random(seed)
    with path.open("w") as out:
        for t in range(tasks):
            task = f"task-{t:05d}"
            ask = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16)))
            for r in range(runs):
                answer = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40)))
                out.write(json.dumps({"id": f"{task}-r{r}", "task_id": task, "reward": rng.random() < 0.4,
                                      "messages": [{"role": "user", "content": f"Task {task}: {ask}."},
                                                   {"role": "assistant", "content": answer}]}) + "\n")


# -- one configuration, in its own process -----------------------------------------------------------

def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_groups(root_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of this process and its descendants, by kind."""
    import psutil

    out: dict[str, float] = {}
    me = psutil.Process(root_pid)
    for proc in [me, *me.children(recursive=True)]:
        try:
            title = " ".join(proc.cmdline())[:200]
            t = proc.cpu_times()
            cpu = t.user + t.system
        except psutil.Error:
            continue
        if proc.pid == root_pid:
            kind = "driver"
        elif "EndpointDesk" in title:
            kind = "ray desk actor"
        elif title.startswith("ray::"):
            kind = "ray workers"
        else:
            kind = "ray daemons (raylet, gcs, ...)"
        out[kind] = round(out.get(kind, 0.0) + cpu, 2)
    return out


def child(args: argparse.Namespace) -> None:
    from veriscale.cli import options as o
    from veriscale.data.pool import load_pool
    from veriscale.engine.run_scope import recorded_run
    from veriscale.many.executors import LocalExecutor, RayExecutor
    from veriscale.many.picks_file import PicksFile
    from veriscale.many.select_many import jobs_of, select_many
    from veriscale.selection.inputs import default_criteria
    from veriscale.selection.settings import SelectionSettings
    from veriscale.verify.criteria import load_criteria

    config, work = args.child, Path(args.work)
    src = REPO / "src" / "veriscale"
    newest = max(src.rglob("*.py"), key=lambda p: p.stat().st_mtime)
    result: dict = {"config": config, "started": time.strftime("%H:%M:%S UTC", time.gmtime()),
                    "src_newest_file": f"{newest.relative_to(REPO)} "
                                       f"{time.strftime('%H:%M:%S UTC', time.gmtime(newest.stat().st_mtime))}"}
    started = time.perf_counter()
    pool = load_pool([args.pool])
    jobs = jobs_of(pool, limit=args.tasks)
    result["pool_load_s"] = round(time.perf_counter() - started, 2)
    del pool
    crits = load_criteria(default_criteria([c for job in jobs for c in job.candidates]))
    cs = o.command_settings([f"{u}#{MODEL_ID}" for u in args.urls.split(",")], work / "store.sqlite3",
                            args.concurrency)
    settings = SelectionSettings(budget=cs.budget, criteria=crits, injection_policy=cs.injection_policy,
                                 **cs.injection())
    verifier = settings.verifier(o.open_model(cs), store=o.open_store(cs), concurrency=cs.concurrency)
    executor: LocalExecutor | RayExecutor
    if config == "local":
        executor = LocalExecutor()
    else:
        import ray

        workers = int(config.removeprefix("ray"))
        started = time.perf_counter()
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}} if args.profile else None)
        executor = RayExecutor(setup=_profile_setup(work) if args.profile else None)
        executor.start()
        result["ray_start_s"] = round(time.perf_counter() - started, 2)
        result["ray_version"] = ray.__version__
    n_jobs = len(jobs)
    rss_at = min(args.rss_at, n_jobs)
    marks: dict[str, float] = {}
    done = 0

    def on_done(record) -> None:
        nonlocal done
        done += 1
        if done == rss_at:
            marks["rss_at"], marks["t_at"] = rss_bytes(), time.perf_counter()
        if done == n_jobs:
            marks["rss_end"], marks["t_end"] = rss_bytes(), time.perf_counter()
        if done % max(1, n_jobs // 20) == 0 or done == n_jobs:
            print(f"{config}: decision {done} of {n_jobs} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr,
                  flush=True)

    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        _time_driver_side(result)
    result["rss_start"] = rss_bytes()
    with recorded_run(verifier.executor.store, "select-many", verifier.model.uri,
                      {"pools": [args.pool], "tasks": n_jobs, "executor": config}) as run:
        t0 = time.perf_counter()
        if profiler:
            profiler.enable()
        report = select_many(jobs, verifier=verifier, settings=settings, picks=PicksFile(work / "picks.jsonl"),
                             at_once=args.tasks_at_once, parent=run.id, on_done=on_done, executor=executor)
        if profiler:
            profiler.disable()
        wall = time.perf_counter() - t0
        run.finish("ok", report.to_dict())
    summary = report.to_dict()
    store_file = work / "store.sqlite3"
    result.update(
        tasks=n_jobs, decided=summary["decided"], failed=summary["failed"], model_calls=summary["model_calls"],
        cache_hits=summary["cache_hits"], wall_s=round(wall, 2), decisions_per_s=round(n_jobs / wall, 2),
        calls_per_s=round(summary["model_calls"] / wall, 1),
        steady_decisions_per_s=(round((n_jobs - rss_at) / (marks["t_end"] - marks["t_at"]), 2)
                                if n_jobs > rss_at and marks["t_end"] > marks["t_at"] else None),
        rss_at_decision=rss_at, rss_at_bytes=marks.get("rss_at"), rss_end_bytes=marks.get("rss_end"),
        rss_growth_pct=round(100 * (marks["rss_end"] - marks["rss_at"]) / marks["rss_at"], 1),
        store_bytes=sum(p.stat().st_size for p in (store_file, Path(f"{store_file}-wal")) if p.exists()),
        store_file_bytes=store_file.stat().st_size,
        failures=summary["failures"][:3], cpu_s=cpu_groups(os.getpid()),
        notes=sorted({n for r in report.records for n in r.notes})[:6],
        calls_per_decision=round(summary["model_calls"] / max(1, n_jobs), 1),
    )
    rows, _ = verifier.executor.store.execute(
        "SELECT status, COUNT(*), MIN(json_extract(result, '$.error')) FROM runs WHERE command = 'select' "
        "GROUP BY status")
    result["select_runs"] = {status: {"runs": n, "an_error": error} for status, n, error in rows}  # retries show here
    result["picks_sha256"] = __import__("hashlib").sha256(
        json.dumps(sorted((r.task, r.pick, r.ranking) for r in report.records)).encode()).hexdigest()[:16]
    if profiler:
        result["driver_profile"] = _top(profiler, 18)
        result["worker_profile"] = _worker_profiles(work, 22)
        result["ray_micro"] = _ray_micro(executor)
    if config != "local":
        import ray

        ray.shutdown()
    verifier.executor.store.close()
    Path(args.result).write_text(json.dumps(result, indent=2))


# -- profiling helpers (only with --profile) ---------------------------------------------------------

def _top(profile, n: int) -> list[str]:
    import io
    import pstats

    buf = io.StringIO()
    pstats.Stats(profile, stream=buf).sort_stats("tottime").print_stats(n)
    return [line.rstrip() for line in buf.getvalue().splitlines() if line.strip()][-(n + 1):]


class _WorkerProfile:
    """A worker's ``setup``: from its second decision on, each decision thread runs under one cProfile
    (accumulated per worker process), dumped to ``folder`` after each decision."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def __call__(self) -> None:
        import cProfile

        import veriscale.many.ray_worker as rw

        if getattr(rw, "_bench_profiled", False):
            return
        rw._bench_profiled = True
        name = "_run" if hasattr(rw, "_run") else "_decide"  # the worker's async body (renamed over time)
        original, profile = getattr(rw, name), cProfile.Profile()
        folder, pid = self.folder, os.getpid()

        async def profiled(payload, out):
            profile.enable()
            try:
                await original(payload, out)
            finally:
                profile.disable()
                profile.dump_stats(f"{folder}/worker-{pid}.prof")

        setattr(rw, name, profiled)


def _profile_setup(work: Path):
    return _WorkerProfile(str(work))


#: the worker-side steps a decision on Ray takes (file suffix, function): their calls and cumulative time
WORKER_STEPS = (("ray_worker.py", "_run"), ("ray_worker.py", "_decide"), ("ray_worker.py", "profiled"),
                ("store.py", "open"), ("uri.py", "load_backend"), ("registry.py", "load_backend"),
                ("ray_worker.py", "put_rows"), ("ray_worker.py", "new"), ("ray_worker.py", "rows_of_keys"),
                ("ray_worker.py", "call_rows"), ("ray_limits.py", "acquire"), ("ray_limits.py", "release"),
                ("ray_limits.py", "install_remote_limits"), ("run_scope.py", "recorded_run"),
                ("select.py", "aselect"), ("gateway.py", "run"), ("store.py", "put_call"), ("store.py", "flush"),
                ("store.py", "execute"), ("store.py", "close"), ("shutil.py", "rmtree"), ("tempfile.py", "mkdtemp"))


def _worker_profiles(work: Path, n: int) -> dict:
    import io
    import pstats

    time.sleep(1.0)  # a worker dumps its profile after it sent its last result
    buf = io.StringIO()
    stats = None
    for path in work.glob("worker-*.prof"):
        try:
            stats = pstats.Stats(str(path), stream=buf) if stats is None else stats.add(str(path))
        except (EOFError, ValueError, OSError):  # caught mid-dump: that worker's profile is left out
            continue
    if stats is None:
        return {}
    stats.sort_stats("tottime").print_stats(n)
    top = [line.rstrip() for line in buf.getvalue().splitlines() if line.strip()][-(n + 1):]
    steps = {}
    for (path, line, func), (cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        for suffix, name in WORKER_STEPS:
            if func == name and path.endswith(suffix):
                key = f"{suffix}:{func}:{line}"
                steps[key] = {"calls": nc, "tottime_s": round(tt, 3), "cumtime_s": round(ct, 3)}
    return {"top_by_tottime": top, "steps": dict(sorted(steps.items(), key=lambda kv: -kv[1]["cumtime_s"]))}


def _time_driver_side(result: dict) -> None:
    """Wrap the driver's per-call and per-decision steps of RayExecutor to time them (bench only)."""
    import veriscale.many.executors as ex

    timing = result.setdefault("driver_timing", {})

    def timed(name, fn):
        def wrapper(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                slot = timing.setdefault(name, [0, 0.0])
                slot[0] += 1
                slot[1] += time.perf_counter() - t
        return wrapper

    for name, what in (("_commit", "commit of a worker's streamed calls (store writer thread)"),
                       ("committed_calls", "committed_calls seed query (per decision)"),
                       ("probed_states", "probed_states")):
        if hasattr(ex, name):
            setattr(ex, name, timed(what, getattr(ex, name)))


def _ray_micro(executor) -> dict[str, float]:
    """Milliseconds per Ray round trip of the kinds a decision makes, on this node now."""
    import asyncio

    import ray

    out: dict[str, float] = {}
    desk = executor.desk

    async def desk_rtt(n: int) -> float:
        t = time.perf_counter()
        for i in range(n):
            await desk.acquire.remote("bench-key", 1000, "bench-holder")
            desk.release.remote("bench-key", "bench-holder")
        return (time.perf_counter() - t) / n * 1000

    @ray.remote(num_returns="streaming", max_retries=0)
    def stream(k: int):
        for i in range(k):
            yield ("calls", {"i": i})

    async def stream_items(k: int) -> float:
        t = time.perf_counter()
        async for ref in stream.remote(k):
            await ref
        return (time.perf_counter() - t) / k * 1000

    async def empty_task(n: int) -> float:
        t = time.perf_counter()
        for _ in range(n):
            async for ref in stream.remote(1):
                await ref
        return (time.perf_counter() - t) / n * 1000

    async def main() -> None:
        await empty_task(5)
        out["desk acquire+release round trip (driver side)"] = round(await desk_rtt(500), 3)
        out["streamed item, per item (2,000 in one task)"] = round(await stream_items(2000), 3)
        out["streaming task of one item, submit to end (sequential)"] = round(await empty_task(200), 3)

    asyncio.run(main())
    return out


# -- the driver of the benchmark -----------------------------------------------------------------------

def proc_cpu(pids: list[int]) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        t = psutil.Process(pid).cpu_times()
        total += t.user + t.system
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=5200, help="decisions per configuration (the pool has --pool-tasks)")
    ap.add_argument("--pool-tasks", type=int, default=5200)
    ap.add_argument("--runs", type=int, default=5, help="Best-of-N: rollouts per task")
    ap.add_argument("--configs", default="local,ray1,ray2,ray4")
    ap.add_argument("--endpoints", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=8, help="calls in flight per endpoint (--concurrency)")
    ap.add_argument("--tasks-at-once", type=int, default=16)
    ap.add_argument("--rss-at", type=int, default=500, help="the decision the first RSS sample is taken at")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--profile", action="store_true", help="instrument the Ray runs (slower: not for the figures)")
    ap.add_argument("--json", default=str(RESULTS))
    ap.add_argument("--append", action="store_true", help="add this run to the --json file's runs (else replace it)")
    # internal: one configuration in its own process
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--pool", help=argparse.SUPPRESS)
    ap.add_argument("--urls", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--table", metavar="JSON", help="print the tables of a results file and stop")
    args = ap.parse_args()
    if args.table:
        for run in json.loads(Path(args.table).read_text())["runs"]:
            print(f"\n{run['command']}  ({run['date']})")
            print_table(run)
        return
    if args.child:
        child(args)
        return

    import ray

    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    machine = {"cpu_count": os.cpu_count(), "python": platform.python_version(), "ray": ray.__version__,
               "platform": platform.platform(), "load_avg_at_start": [round(x, 2) for x in os.getloadavg()]}
    out: dict = {"benchmark": "select_many_scale", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 "command": " ".join(["python benchmarks/bench_select_many_scale.py", *sys.argv[1:]]),
                 "machine": machine,
                 "setup": {"pool_rollouts": args.pool_tasks * args.runs, "pool_tasks": args.pool_tasks,
                           "runs_per_task": args.runs, "endpoints": args.endpoints,
                           "concurrency_per_endpoint": args.concurrency, "tasks_at_once": args.tasks_at_once,
                           "selection": "CLI defaults: ppt, k=2, adaptive, min_confidence 0.9, letters scale",
                           "model": "zero-latency benchmark double (benchmarks/zero_latency_endpoint.py)"},
                 "configs": {}}
    print(f"machine: {os.cpu_count()} cores (os.cpu_count()), Python {machine['python']}, Ray {machine['ray']}, "
          f"load {machine['load_avg_at_start']}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        pool = Path(tmp) / "pool.jsonl"
        write_pool(pool, args.pool_tasks, args.runs, args.seed)
        out["setup"]["pool_bytes"] = pool.stat().st_size
        procs, urls = start_endpoints(args.endpoints)
        try:
            for config in configs:
                work = Path(tmp) / config
                work.mkdir()
                before = [stats(u) for u in urls]
                cpu_before = proc_cpu([p.pid for p in procs])
                load_before = os.getloadavg()[0]
                cmd = [sys.executable, __file__, "--child", config, "--pool", str(pool), "--urls", ",".join(urls),
                       "--work", str(work), "--result", str(work / "result.json"), "--tasks", str(args.tasks),
                       "--concurrency", str(args.concurrency), "--tasks-at-once", str(args.tasks_at_once),
                       "--rss-at", str(args.rss_at)] + (["--profile"] if args.profile else [])
                print(f"{config}: starting ({args.tasks} tasks)", file=sys.stderr, flush=True)
                done = subprocess.run(cmd)
                if done.returncode != 0:
                    out["configs"][config] = {"error": f"exit {done.returncode}"}
                    continue
                result = json.loads((work / "result.json").read_text())
                result["cpu_s"]["endpoints"] = round(proc_cpu([p.pid for p in procs]) - cpu_before, 2)
                after = [stats(u) for u in urls]
                result["endpoint_chat_calls"] = [a.get("POST /v1/chat/completions", 0) - b.get("POST /v1/chat/completions", 0)
                                                 for a, b in zip(after, before)]
                result["endpoint_other_requests"] = sorted({k for a in after for k in a
                                                            if k not in ("POST /v1/chat/completions", "GET /bench/stats")})
                result["load_avg_1m_before_after"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
                out["configs"][config] = result
        finally:
            stop_endpoints(procs)
    base = out["configs"].get("local", {}).get("decisions_per_s")
    for name, r in out["configs"].items():
        if base and name != "local" and r.get("decisions_per_s"):
            r["ratio_vs_local"] = round(r["decisions_per_s"] / base, 3)
            if r.get("steady_decisions_per_s") and out["configs"]["local"].get("steady_decisions_per_s"):
                r["steady_ratio_vs_local"] = round(r["steady_decisions_per_s"]
                                                   / out["configs"]["local"]["steady_decisions_per_s"], 3)
    path = Path(args.json)
    old = json.loads(path.read_text()) if args.append and path.exists() else {"runs": []}
    old.setdefault("runs", []).append(out)
    path.write_text(json.dumps(old, indent=2) + "\n")
    print_table(out)


def print_table(out: dict) -> None:
    mib = 1 / (1 << 20)
    print(f"cores: {out['machine']['cpu_count']}  python {out['machine']['python']}  ray {out['machine']['ray']}")
    head = ("config", "tasks", "dec/s", "steady", "vs local", "calls", "calls/s", "CPU s/dec", "RSS@N MiB",
            "RSS end MiB", "growth %", "store MiB", "wall s", "load 1m")
    print(" | ".join(head))
    for name, r in out["configs"].items():
        if "error" in r:
            print(f"{name} | {r['error']}")
            continue
        print(" | ".join(str(x) for x in (
            name, r["tasks"], r["decisions_per_s"], r["steady_decisions_per_s"], r.get("ratio_vs_local", "-"),
            r["model_calls"], r["calls_per_s"], round(sum(r["cpu_s"].values()) / r["tasks"], 3),
            f"{round(r['rss_at_bytes'] * mib, 1)} @{r['rss_at_decision']}", round(r["rss_end_bytes"] * mib, 1),
            r["rss_growth_pct"], round(r["store_bytes"] * mib, 1), r["wall_s"],
            "/".join(str(x) for x in r.get("load_avg_1m_before_after", [])))))


if __name__ == "__main__":
    main()
