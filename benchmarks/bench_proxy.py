"""The Best-of-N proxy (``/v1/chat/completions``, ``/v1/responses``, ``/v1/messages``): what it
adds over calling the upstream directly, measured in one run on this machine.

    python benchmarks/bench_proxy.py [--requests 200] [--n 3] [--verify-requests 8]
                                     [--skip-llama] [--profile] [--json out.json]
    python benchmarks/bench_proxy.py --part pick [--pick-requests 5]     # part 5 only

(``PYTHONPATH=src:.`` when veriscale is not installed.) Never part of the test suite. The
proxy is the real ``veriscale serve`` app (``create_app(..., proxy=open_proxy(...))``, uvicorn
in a thread of this process, ``tests/support/served_app.py``) over a fresh temp store per
part; upstreams are ``tests/support/fault_server.py`` servers, each in its own process
(OpenAI-compatible, answering with a fixed reply after ``delay_s``), or a real llama.cpp
server (``benchmarks/_common.py llama_server``, the embedded model's GGUF). Every request's
messages are distinct (a run tag and a counter), so every proxy request really fans out:
candidates are gateway chat calls cached by (messages, params, seed), and none is a cache
hit. Progress tracking (``[proxy] progress``) is off unless a row says otherwise, since it
runs after the reply and would otherwise load the next request. Four parts:

1. **Added latency, candidates agree** (target < 5 ms). One zero-latency upstream, N = ``--n``
   candidates of it; identical replies, so they agree and no verification runs. ``--requests``
   pairs (after warm-up), each a direct ``POST {upstream}/chat/completions`` with httpx and the
   same request through the proxy, interleaved (the side going first alternates). Reported:
   median and p90 of each side and of the per-pair difference, plus two smaller rows: N = 1
   (the fixed cost of a request, without the per-candidate part) and N = ``--n`` with progress
   tracking on. Above 5 ms (or with ``--profile``) one batch is profiled with cProfile in
   every thread of the process (uvicorn's, the gateway loop's, ``to_thread`` workers): the top
   self-time functions (waiting and one-off setup left out), self time by package, and the
   veriscale functions with the most cumulative time, each in ms per request (profiled, so
   inflated; compare them with each other).
2. **Added latency, verification runs.** Three zero-latency upstreams with different replies
   as three pools of one candidate (``candidates=((u1, 1), (u2, 1), (u3, 1))``), so they never
   agree and PPT verification picks; the verifier is the embedded model in process and (unless
   ``--skip-llama``) the same GGUF behind a llama.cpp server with logprobs. Reported: median
   added latency over a direct call, the proxy's own split (``sample_s`` / ``verify_s`` of
   the run record) and the verifier calls a request took (the run's non-chat calls).
3. **Time to first streamed byte.** A slow upstream (``delay_s=1.0``), N = ``--n``, a
   streamed request to each API: time to the response headers, to the first body byte and to
   the first content event (chat: the first ``data:`` chunk; Responses:
   ``response.output_item.added``; Messages: ``content_block_start``), and to the end, vs
   the upstream's own time to its non-streamed answer.
4. **Fan-out vs sequential.** An upstream with ``delay_s=0.2``, N = 4: the proxy request's
   wall time (and the fan-out alone, the record's ``sample_s``) vs 4 sequential direct calls
   of the same request; ratio (ideal 1/N = 0.25). Then the same against the llama.cpp server
   (temperature 0, so the greedy candidates agree and nothing is verified); that server
   decodes one request at a time on 2 cores, so there the ratio cannot approach 1/N.
5. **The pick's schedule** (``--part pick`` runs only this part). Three upstreams with
   different replies that arrive at different times (``--pick-delays``, default 0, 0.4 and 1.2 s), one
   candidate each (N = 3), the embedded verifier in process; ``--pick-requests`` requests with
   each setup, alternating, in one run: today's ``round_robin`` with separate scoring
   and the ``early`` schedule with joint scoring (``veriscale.proxy.pick``), and for context
   round robin with joint scoring (3 pairs x 2 slot orders = 6 calls). Reported per
   setup: verifier calls per disagreeing request (the run's non-chat calls) and the added
   latency over the slowest candidate (the record's ``verify_after_last_s``), medians, against
   the target of at most 6 calls.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import multiprocessing
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.support.served_app / fault_server

from _common import wait_models  # noqa: E402  (benchmarks/ is this script's folder)
from tests.support.served_app import served
from veriscale.engine.store import Store
from veriscale.models.uri import load_backend
from veriscale.proxy.settings import ProxySettings
from veriscale.proxy.setup import open_proxy
from veriscale.server.app import create_app
from veriscale.server.jobs import JobRunner
from veriscale.server.security import AccessPolicy

TAG = uuid.uuid4().hex[:8]  # this run's messages are never in any store
SYSTEM = "You are a coding agent working in a git repository. Answer with the next step."
DISAGREE = ({"Run `ls -la` to see the files first.": 0.9, "x": 0.1},
            {"Open README.md and read the build instructions.": 0.9, "x": 0.1},
            {"Delete the repository and start over.": 0.9, "x": 0.1})
WAITS = ("poll' of 'select.epoll", "acquire' of '_thread.lock", "time.sleep", "select.select", "'_thread.lock' objects",
         "method 'select'", "wait' of 'threading.Condition", "get' of '_queue.SimpleQueue")


# -- upstreams, each in its own process ---------------------------------------------------------
def _fault_main(top: dict[str, float] | None, delay_s: float, ports: Any) -> None:
    from tests.support.fault_server import FaultServer

    srv = FaultServer(top=top, delay_s=delay_s)
    ports.put(srv.port)
    with srv:
        while True:
            time.sleep(3600)


@contextmanager
def upstream(top: dict[str, float] | None = None, delay_s: float = 0.0) -> Iterator[str]:
    ctx = multiprocessing.get_context("spawn")
    ports = ctx.Queue()
    proc = ctx.Process(target=_fault_main, args=(top, delay_s, ports), daemon=True)
    proc.start()
    url = f"http://127.0.0.1:{ports.get(timeout=60)}/v1"
    wait_models(url)
    try:
        yield url
    finally:
        proc.terminate()
        proc.join(10)


@contextmanager
def proxy(tmp: Path, name: str, candidates: list[tuple[str, int]], verifier: Any, *,
          progress: bool = False, schedule: str = "auto", budget: str | None = None) -> Iterator[tuple[str, Store]]:
    """The real serve app with the proxy, over a fresh store, on a free port (``budget``: ``[proxy] budget``)."""
    store = Store.open(tmp / f"{name}.sqlite3")
    settings = ProxySettings(candidates=tuple(candidates), progress=progress, timeout_s=300.0, schedule=schedule,
                             budget=budget)
    service = open_proxy(settings, verifier, store)
    runner = JobRunner(store, verifier)  # never started: no jobs here

    def app_for(port: int):
        return create_app(store, runner, AccessPolicy.for_bind("127.0.0.1", port, token=None), proxy=service)

    with served(app_for, health="/api/health") as url:
        yield url, store


# -- requests -----------------------------------------------------------------------------------
_counter = iter(range(10**9))


def chat_body(model: str = "fault-model", **extra: Any) -> dict[str, Any]:
    k = next(_counter)
    return {"model": model, "max_tokens": 64, **extra,
            "messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": f"Build the project ({TAG}-{k}). What do you do first?"}]}


def timed_post(client: httpx.Client, url: str, body: dict[str, Any]) -> tuple[float, httpx.Response]:
    t = time.perf_counter()
    r = client.post(url, json=body)
    r.read()
    elapsed = time.perf_counter() - t
    if r.status_code != 200:
        raise RuntimeError(f"{url}: {r.status_code} {r.text[:300]}")
    return elapsed, r


def q(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]


def ms(x: float) -> float:
    return round(x * 1000, 2)


def summary(xs: list[float]) -> dict[str, float]:
    return {"median_ms": ms(statistics.median(xs)), "p90_ms": ms(q(xs, 0.9))}


# -- 1. candidates agree ------------------------------------------------------------------------
def latency_pairs(client: httpx.Client, direct_url: str, proxy_url: str, requests: int,
                  warmup: int = 20) -> dict[str, Any]:
    direct, proxied, diff = [], [], []
    hows: dict[str, int] = {}
    for i in range(warmup + requests):
        body = chat_body()
        if i % 2 == 0:
            d, _ = timed_post(client, direct_url + "/chat/completions", body)
            p, r = timed_post(client, proxy_url + "/v1/chat/completions", body)
        else:
            p, r = timed_post(client, proxy_url + "/v1/chat/completions", body)
            d, _ = timed_post(client, direct_url + "/chat/completions", body)
        if i < warmup:
            continue
        direct.append(d)
        proxied.append(p)
        diff.append(p - d)
        how = r.headers.get("x-veriscale-pick", "?")
        hows[how] = hows.get(how, 0) + 1
    return {"requests": requests, "direct": summary(direct), "proxy": summary(proxied), "added": summary(diff),
            "added_of_medians_ms": ms(statistics.median(proxied) - statistics.median(direct)), "picks": hows}


class ThreadProfiler:
    """cProfile in every thread started between start() and stop() (the proxy and its event loop)."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        p = cProfile.Profile()
        with self._lock:
            self.profiles.append(p)
        p.enable()  # replaces this hook in this thread

    def start(self) -> None:
        threading.setprofile(self._hook)

    def stop(self) -> None:
        threading.setprofile(None)  # type: ignore[arg-type]

    def top(self, per: int, n: int = 5) -> list[dict[str, Any]]:
        stats = pstats.Stats(self.profiles[0])
        for p in self.profiles[1:]:
            try:
                stats.add(p)
            except TypeError:  # a thread that never ran Python
                pass
        rows = []
        for (file, line, fn), (_cc, calls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            where = f"{Path(file).name}:{line}({fn})" if line else fn
            if any(w in where for w in WAITS):
                continue
            rows.append({"function": where, "file": file, "calls_per_request": round(calls / per, 1),
                         "self_ms_per_request": round(tottime * 1000 / per, 3),
                         "cum_ms_per_request": round(cumtime * 1000 / per, 3)})
        rows.sort(key=lambda r: -r["self_ms_per_request"])
        by_package: dict[str, float] = {}
        for r in rows:
            by_package[_package(r["file"], r["function"])] = by_package.get(_package(r["file"], r["function"]), 0.0) + r[
                "self_ms_per_request"]
        own = sorted((r for r in rows if "/veriscale/" in r["file"]), key=lambda r: -r["cum_ms_per_request"])
        return {"threads_profiled": len(self.profiles),
                "top_self": [r for r in rows if r["calls_per_request"] >= 0.5][:n],  # one-off setup costs left out
                "self_ms_by_package": {k: round(v, 3) for k, v in sorted(by_package.items(), key=lambda kv: -kv[1])[:10]},
                "top_veriscale_cumulative": own[:n]}


def _package(file: str, function: str) -> str:
    if file == "~":  # "<method 'send' of '_socket.socket' objects>", "<built-in method _pickle.dumps>"
        name = function.split(" of '")[-1] if " of '" in function else function.split()[-1].strip("<>")
        return "builtin " + name.split(".")[0].lstrip("_").strip("'<>")
    parts = Path(file).parts
    if "veriscale" in parts:
        i = parts.index("veriscale")
        return "veriscale." + parts[i + 1].removesuffix(".py")
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    if len(parts) < 2 or not file.endswith(".py"):
        return file  # <frozen ...>, <string>
    return "stdlib " + (parts[-2] if parts[-1] == "__init__.py" or not parts[-2].startswith("python3") else
                        parts[-1]).removesuffix(".py")


def part_agree(tmp: Path, client: httpx.Client, args: argparse.Namespace) -> dict[str, Any]:
    with upstream() as up:
        uri = up + "#fault-model"
        verifier = load_backend(uri)
        out: dict[str, Any] = {"n": args.n}
        with proxy(tmp, "agree", [(uri, args.n)], verifier) as (url, _store):
            out["progress_off"] = latency_pairs(client, up, url, args.requests)
        with proxy(tmp, "agree-n1", [(uri, 1)], verifier) as (url, _store):
            out["n_1"] = latency_pairs(client, up, url, max(20, args.requests // 2))
        with proxy(tmp, "agree-progress", [(uri, args.n)], verifier, progress=True) as (url, _store):
            out["progress_on"] = latency_pairs(client, up, url, max(20, args.requests // 4))
        added = out["progress_off"]["added"]["median_ms"]
        out["target_5ms_holds"] = added < 5.0
        if added >= 5.0 or args.profile:
            batch = 50
            prof = ThreadProfiler()
            prof.start()
            try:
                with proxy(tmp, "agree-profile", [(uri, args.n)], verifier) as (url, _store):
                    for _ in range(5):
                        timed_post(client, url + "/v1/chat/completions", chat_body())
                    t = time.perf_counter()
                    for _ in range(batch):
                        timed_post(client, url + "/v1/chat/completions", chat_body())
                    wall = time.perf_counter() - t
            finally:
                prof.stop()
            out["profile"] = {"requests": batch + 5, "wall_ms_per_request_profiled": ms(wall / batch),
                              **prof.top(batch + 5)}
    return out


# -- 2. verification runs -----------------------------------------------------------------------
def verify_rows(tmp: Path, client: httpx.Client, name: str, verifier: Any, ups: list[str], direct: str,
                requests: int) -> dict[str, Any]:
    pools = [(u + "#fault-model", 1) for u in ups]
    added, proxied, sample, verify, calls, hits = [], [], [], [], [], []
    labels: Counter[str] = Counter()
    hows: dict[str, int] = {}
    with proxy(tmp, name, pools, verifier) as (url, store):
        timed_post(client, url + "/v1/chat/completions", chat_body())  # warm-up (loads, first prompt)
        for i in range(requests):
            body = chat_body()
            d, _ = timed_post(client, direct + "/chat/completions", body)
            p, r = timed_post(client, url + "/v1/chat/completions", body)
            added.append(p - d)
            proxied.append(p)
            run_id = int(r.headers["x-veriscale-run"])
            hows[r.headers.get("x-veriscale-pick", "?")] = hows.get(r.headers.get("x-veriscale-pick", "?"), 0) + 1
            result = store.run(run_id).result or {}
            sample.append(result.get("sample_s", 0.0))
            verify.append(result.get("verify_s", 0.0))
            used = [c for c in store.run_calls(run_id) if c["kind"] != "chat"]
            calls.append(len(used))
            hits.append(sum(c["cache_hit"] for c in used))
            labels.update((c["label"] or c["kind"] or "?").split(":")[0] for c in used)
    return {"verifier": getattr(verifier, "uri", name), "requests": requests, "proxy": summary(proxied),
            "added": summary(added), "sample_median_ms": ms(statistics.median(sample)),
            "verify_median_ms": ms(statistics.median(verify)),
            "verifier_calls": {"median": statistics.median(calls), "min": min(calls), "max": max(calls),
                               "cache_hits": sum(hits), "labels": dict(labels.most_common(8))},
            "picks": hows}


def part_verify(tmp: Path, client: httpx.Client, args: argparse.Namespace, llama_url: str | None) -> dict[str, Any]:
    with upstream(DISAGREE[0]) as u1, upstream(DISAGREE[1]) as u2, upstream(DISAGREE[2]) as u3:
        out = {"embedded": verify_rows(tmp, client, "verify-embedded", load_backend("embedded"), [u1, u2, u3], u1,
                                       args.verify_requests)}
        if llama_url is not None:
            out["llama_server"] = verify_rows(tmp, client, "verify-llama", load_backend(llama_url + "#smollm2"),
                                              [u1, u2, u3], u1, args.verify_requests)
    return out


# -- 3. time to first streamed byte -------------------------------------------------------------
CONTENT_MARK = {"chat": "data: {", "responses": "event: response.output_item.added",
                "messages": "event: content_block_start"}


def stream_body(api: str) -> tuple[str, dict[str, Any]]:
    body = chat_body()
    if api == "chat":
        return "/v1/chat/completions", {**body, "stream": True}
    if api == "responses":
        return "/v1/responses", {"model": "fault-model", "instructions": SYSTEM, "stream": True,
                                 "input": body["messages"][1]["content"], "max_output_tokens": 64}
    return "/v1/messages", {"model": "fault-model", "system": SYSTEM, "max_tokens": 64, "stream": True,
                            "messages": [body["messages"][1]]}


def one_stream(client: httpx.Client, url: str, body: dict[str, Any], mark: str) -> dict[str, float]:
    t = time.perf_counter()
    times: dict[str, float] = {}
    text = ""
    with client.stream("POST", url, json=body) as r:
        times["headers"] = time.perf_counter() - t
        if r.status_code != 200:
            raise RuntimeError(f"{url}: {r.status_code} {r.read()[:300]!r}")
        for chunk in r.iter_raw():
            now = time.perf_counter() - t
            times.setdefault("first_byte", now)
            text += chunk.decode("utf-8", "replace")
            if "first_content" not in times and mark in text:
                times["first_content"] = now
        times["done"] = time.perf_counter() - t
    times["first_chunk_is_content"] = float(text.lstrip().startswith(mark))
    return times


def part_stream(tmp: Path, client: httpx.Client, args: argparse.Namespace, repeats: int = 3) -> dict[str, Any]:
    out: dict[str, Any] = {"delay_s": 1.0, "n": args.n, "repeats": repeats}
    with upstream(delay_s=1.0) as up:
        uri = up + "#fault-model"
        # the verifier is probed at start: keep it off the slow upstream
        with upstream() as fast, proxy(tmp, "stream", [(uri, args.n)], load_backend(fast + "#fault-model")) as (url, _):
            own = [timed_post(client, up + "/chat/completions", chat_body())[0] for _ in range(repeats)]
            out["upstream_answer"] = summary(own)
            for api in ("chat", "responses", "messages"):
                path, _ = stream_body(api)
                one_stream(client, url + path, stream_body(api)[1], CONTENT_MARK[api])  # warm-up
                runs = [one_stream(client, url + path, stream_body(api)[1], CONTENT_MARK[api]) for _ in range(repeats)]
                out[api] = {k: ms(statistics.median(r[k] for r in runs)) for k in ("headers", "first_byte",
                                                                                    "first_content", "done")}
                out[api]["first_chunk_is_content"] = all(r["first_chunk_is_content"] for r in runs)
    return out


# -- 4. fan-out vs sequential -------------------------------------------------------------------
def fan_rows(tmp: Path, client: httpx.Client, name: str, up: str, uri: str, verifier: Any, n: int, rounds: int,
             **body_extra: Any) -> dict[str, Any]:
    model = uri.split("#", 1)[1]
    fan, sample, seq, hows = [], [], [], {}
    with proxy(tmp, name, [(uri, n)], verifier) as (url, store):
        timed_post(client, url + "/v1/chat/completions", chat_body(model, **body_extra))  # warm-up
        for i in range(rounds):
            body = chat_body(model, **body_extra)
            if i % 2:
                s = sum(timed_post(client, up + "/chat/completions", body)[0] for _ in range(n))
            p, r = timed_post(client, url + "/v1/chat/completions", body)
            if not i % 2:
                s = sum(timed_post(client, up + "/chat/completions", body)[0] for _ in range(n))
            fan.append(p)
            seq.append(s)
            result = store.run(int(r.headers["x-veriscale-run"])).result or {}
            sample.append(result.get("sample_s", 0.0))
            hows[r.headers.get("x-veriscale-pick", "?")] = hows.get(r.headers.get("x-veriscale-pick", "?"), 0) + 1
    return {"n": n, "rounds": rounds, "proxy_median_ms": ms(statistics.median(fan)),
            "fan_out_only_median_ms": ms(statistics.median(sample)),
            "sequential_median_ms": ms(statistics.median(seq)),
            "ratio_proxy_over_sequential": round(statistics.median(fan) / statistics.median(seq), 3),
            "ratio_fan_out_over_sequential": round(statistics.median(sample) / statistics.median(seq), 3),
            "ideal": round(1 / n, 3), "picks": hows}


def part_fanout(tmp: Path, client: httpx.Client, args: argparse.Namespace, llama_url: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with upstream(delay_s=0.2) as up, upstream() as fast:
        out["fault_server_0.2s"] = fan_rows(tmp, client, "fan", up, up + "#fault-model",
                                            load_backend(fast + "#fault-model"), 4, 10)
    if llama_url is not None:
        out["llama_server"] = fan_rows(tmp, client, "fan-llama", llama_url, llama_url + "#smollm2",
                                       load_backend(llama_url + "#smollm2"), 4, 3, temperature=0, max_tokens=32)
    return out


# -- 5. the pick's schedule --------------------------------------------------------------------
PICK_SETUPS = {"round_robin, separate scoring": ("round_robin", False), "early, joint scoring": ("early", True),
               "round_robin, joint scoring": ("round_robin", True)}
PICK_TARGET_CALLS = 6


def part_pick(tmp: Path, client: httpx.Client, args: argparse.Namespace) -> dict[str, Any]:
    from veriscale.settings import source as setting_source

    verifier = load_backend("embedded")
    rows: dict[str, dict[str, list[float]]] = {name: {"calls": [], "after_last": [], "sample": []} for name in PICK_SETUPS}
    hows: dict[str, Counter[str]] = {name: Counter() for name in PICK_SETUPS}
    delays = [float(x) for x in args.pick_delays.split(",")]
    with upstream(DISAGREE[0], delays[0]) as u1, upstream(DISAGREE[1], delays[1]) as u2, \
            upstream(DISAGREE[2], delays[2]) as u3:
        pools = [(u + "#fault-model", 1) for u in (u1, u2, u3)]
        with proxy(tmp, "pick-rr", pools, verifier, schedule="round_robin") as rr, \
                proxy(tmp, "pick-early", pools, verifier, schedule="early") as early:
            served_by = {"round_robin": rr, "early": early}
            timed_post(client, u1 + "/chat/completions", chat_body())  # the upstreams are up
            for i in range(args.pick_requests + 1):  # the first round warms the model up and is left out
                names = list(PICK_SETUPS) if i % 2 else list(reversed(PICK_SETUPS))
                for name in names:
                    schedule, joint = PICK_SETUPS[name]
                    setting_source.choose({"joint": "on" if joint else "off"})  # what --joint sets: every Verifier it builds
                    url, store = served_by[schedule]
                    _, r = timed_post(client, url + "/v1/chat/completions", chat_body())
                    result = store.run(int(r.headers["x-veriscale-run"])).result or {}
                    if i == 0:
                        continue
                    hows[name][result.get("how", "?")] += 1
                    used = [c for c in store.run_calls(int(r.headers["x-veriscale-run"])) if c["kind"] != "chat"]
                    rows[name]["calls"].append(len(used) - sum(c["cache_hit"] for c in used))
                    rows[name]["after_last"].append(result.get("verify_after_last_s", result.get("verify_s", 0.0)))
                    rows[name]["sample"].append(result.get("sample_s", 0.0))
            setting_source.choose({})
    out: dict[str, Any] = {"n": 3, "delays_s": delays, "requests": args.pick_requests, "verifier": "embedded",
                           "target_calls": PICK_TARGET_CALLS}
    for name, r in rows.items():
        out[name] = {"verifier_calls": {"median": statistics.median(r["calls"]), "max": max(r["calls"])},
                     "added_after_slowest_median_ms": ms(statistics.median(r["after_last"])),
                     "fan_out_median_ms": ms(statistics.median(r["sample"])), "picks": dict(hows[name])}
    early, rr = out["early, joint scoring"], out["round_robin, separate scoring"]
    out["target_met"] = early["verifier_calls"]["max"] <= PICK_TARGET_CALLS
    out["ratio_added_early_over_round_robin"] = round(
        early["added_after_slowest_median_ms"] / max(rr["added_after_slowest_median_ms"], 1e-9), 3)
    return out


def pick_table(p: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    for name in PICK_SETUPS:
        r = p[name]
        rows.append((f"5 pick N=3 ({name}; delays {p['delays_s']} s)", f"verifier calls median {r['verifier_calls']['median']}, max "
                     f"{r['verifier_calls']['max']}", f"added after slowest median {r['added_after_slowest_median_ms']} ms "
                     f"({p['requests']} req)"))
    rows.append((f"5 target <= {p['target_calls']} calls", "met" if p["target_met"] else "NOT MET",
                 f"added latency early / round robin {p['ratio_added_early_over_round_robin']}"))
    return rows


# -- main ---------------------------------------------------------------------------------------
def table(result: dict[str, Any]) -> str:
    rows = []
    if "pick" in result:
        rows += pick_table(result["pick"])
    if "agree" not in result:
        width = [max(len(r[i]) for r in rows) for i in range(3)]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip() for r in rows)
    a = result["agree"]
    for key in ("progress_off", "n_1", "progress_on"):
        r = a[key]
        n = 1 if key == "n_1" else a["n"]
        tracking = "progress on" if key == "progress_on" else "progress off"
        rows.append((f"1 agree N={n} ({tracking})",
                     f"direct {r['direct']['median_ms']} / proxy {r['proxy']['median_ms']} ms",
                     f"added median {r['added']['median_ms']} ms, p90 {r['added']['p90_ms']} ms ({r['requests']} req)"))
    rows.append(("1 target < 5 ms", "holds" if a["target_5ms_holds"] else "MISSED", ""))
    for key, r in result["verify"].items():
        calls = r["verifier_calls"]
        rows.append((f"2 verify ({key})", f"added median {r['added']['median_ms']} ms, p90 {r['added']['p90_ms']} ms",
                     f"verify {r['verify_median_ms']} ms, verifier calls {calls['median']} [{calls['min']}-{calls['max']}]"))
    s = result["stream"]
    rows.append(("3 upstream own answer", f"{s['upstream_answer']['median_ms']} ms", ""))
    for api in ("chat", "responses", "messages"):
        r = s[api]
        rows.append((f"3 stream {api}", f"headers {r['headers']} / first byte {r['first_byte']} ms",
                     f"first content {r['first_content']} ms, done {r['done']} ms"))
    for key, r in result["fanout"].items():
        rows.append((f"4 fan-out N={r['n']} ({key})",
                     (f"proxy {r['proxy_median_ms']} (fan-out {r['fan_out_only_median_ms']}) vs sequential "
                      f"{r['sequential_median_ms']} ms"),
                     (f"ratio {r['ratio_proxy_over_sequential']} (fan-out {r['ratio_fan_out_over_sequential']}, "
                      f"ideal {r['ideal']})")))
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip() for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200, help="request pairs of part 1 (after 20 warm-up)")
    ap.add_argument("--n", type=int, default=3, help="candidates in parts 1 and 3 (part 4 uses 4)")
    ap.add_argument("--verify-requests", type=int, default=8, help="requests of part 2, per verifier")
    ap.add_argument("--skip-llama", action="store_true", help="no llama.cpp server (parts 2 and 4)")
    ap.add_argument("--profile", action="store_true", help="profile a batch of part 1 even under 5 ms")
    ap.add_argument("--part", choices=("all", "pick"), default="all", help="pick: only part 5 (the pick's schedule)")
    ap.add_argument("--pick-requests", type=int, default=5, help="requests of part 5, per setup")
    ap.add_argument("--pick-delays", default="0,0.4,1.2", help="part 5: seconds each of the 3 upstreams takes")
    ap.add_argument("--json")
    args = ap.parse_args()
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg()}}
    client = httpx.Client(timeout=600)

    def done(part: str, value: dict[str, Any]) -> None:  # each part kept as soon as it is measured
        result[part] = value
        print(f"{part}: done", file=sys.stderr, flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.part == "pick":
            done("pick", part_pick(tmp, client, args))
            print(json.dumps(result, indent=2))
            print()
            print(table(result))
            return
        done("agree", part_agree(tmp, client, args))
        done("stream", part_stream(tmp, client, args))
        if args.skip_llama:
            done("verify", part_verify(tmp, client, args, None))
            done("fanout", part_fanout(tmp, client, args, None))
        else:
            from _common import llama_server

            from veriscale.models.embedded_files import default_gguf_path

            with llama_server(str(default_gguf_path())) as llama_url:
                done("verify", part_verify(tmp, client, args, llama_url))
                done("fanout", part_fanout(tmp, client, args, llama_url))
        done("pick", part_pick(tmp, client, args))
    result["machine"]["load_avg_at_end"] = os.getloadavg()
    print(json.dumps(result, indent=2))
    print()
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
