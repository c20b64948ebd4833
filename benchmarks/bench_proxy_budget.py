"""The proxy's pick inside ``[proxy] budget``: verifier calls, added latency and picks at N = 3.

    python benchmarks/bench_proxy_budget.py                       # 3 requests per setup
    python benchmarks/bench_proxy_budget.py --requests 5 --json out.json

Three upstreams with different replies (one candidate each, answering after 0, 0.4 and 1.2 s,
so every request disagrees), the embedded verifier in process, ``[proxy] criteria = "agent"``
(3 criteria) scored separately. Setups, one proxy and one fresh store each, asked the same
requests in alternating order: no budget (round robin, every pair: 18 calls), ``calls=6`` and
``calls=12`` (the cost controller), ``early`` at ``calls=7`` (the early pick on the first
criterion). Reported per setup: the fresh verifier calls per request (the run's non-chat calls
less cache hits; median, max) against its budget, the budget's ``spent``, the added latency
after the slowest candidate (``verify_after_last_s``, median) and how often the pick equals the
unbudgeted one on the same request. Run on demand, not in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_proxy import DISAGREE, chat_body, proxy, timed_post, upstream  # noqa: E402

SETUPS = {"no budget (round robin)": ("auto", None), "calls=6 (controller)": ("auto", "calls=6"),
          "calls=12 (controller)": ("auto", "calls=12"), "early, calls=7": ("early", "calls=7")}


def run(requests: int, delays: list[float]) -> dict[str, Any]:
    from veriscale.settings import source as setting_source
    from veriscale.models.uri import load_backend

    setting_source.choose({"joint": "off"})
    verifier = load_backend("embedded")
    client = httpx.Client(timeout=900)
    rows: dict[str, dict[str, list]] = {name: {"calls": [], "spent": [], "after": [], "winner": []} for name in SETUPS}
    with tempfile.TemporaryDirectory() as d, upstream(DISAGREE[0], delays[0]) as u1, \
            upstream(DISAGREE[1], delays[1]) as u2, upstream(DISAGREE[2], delays[2]) as u3:
        pools = [(u + "#fault-model", 1) for u in (u1, u2, u3)]
        served = {}
        opened = []
        for i, (name, (schedule, budget)) in enumerate(SETUPS.items()):
            cm = proxy(Path(d), f"budget-{i}", pools, verifier, schedule=schedule, budget=budget)
            served[name] = cm.__enter__()
            opened.append(cm)
        try:
            for i in range(requests + 1):  # the first round warms the model up and is left out
                body = chat_body()
                for name in (list(SETUPS) if i % 2 else list(reversed(SETUPS))):
                    url, store = served[name]
                    _, r = timed_post(client, url + "/v1/chat/completions", body)
                    run_id = int(r.headers["x-veriscale-run"])
                    result = store.run(run_id).result or {}
                    if i == 0:
                        continue
                    used = [c for c in store.run_calls(run_id) if c["kind"] != "chat"]
                    rows[name]["calls"].append(len(used) - sum(c["cache_hit"] for c in used))
                    rows[name]["spent"].append((result.get("budget") or {}).get("spent"))
                    rows[name]["after"].append(result.get("verify_after_last_s", 0.0))
                    rows[name]["winner"].append(result.get("winner"))
        finally:
            for cm in reversed(opened):
                cm.__exit__(None, None, None)
    setting_source.choose({})
    base = rows["no budget (round robin)"]["winner"]
    out: dict[str, Any] = {"n": 3, "delays_s": delays, "requests": requests, "criteria": "agent (3, separate)",
                           "load_avg": os.getloadavg()}
    for name, r in rows.items():
        budget = SETUPS[name][1]
        out[name] = {"budget": budget, "calls_median": statistics.median(r["calls"]), "calls_max": max(r["calls"]),
                     "spent": r["spent"], "within_budget": budget is None or max(r["calls"]) <= int(budget.split("=")[1]),
                     "added_after_slowest_median_s": round(statistics.median(r["after"]), 2),
                     "same_pick_as_no_budget": sum(a == b for a, b in zip(r["winner"], base)) / len(base)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=3, help="requests per setup (after one warm-up round)")
    ap.add_argument("--delays", default="0,0.4,1.2", help="seconds each of the 3 upstreams takes")
    ap.add_argument("--json")
    args = ap.parse_args()
    out = run(args.requests, [float(x) for x in args.delays.split(",")])
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
