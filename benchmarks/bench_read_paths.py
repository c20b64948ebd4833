"""How far each HTTP read path is from the distribution the weights give (the embedded model).

One llama_cpp.server of the embedded GGUF; the shortest dev pairs, C = 3 criteria, both slot
orders; every slot read in process (exact) and through each path the server offers:

- ``completions exact``: ``?template=chatml`` (the probe finds the wide logprobs read);
- ``completions top-k``: ``?template=chatml&read=top-k`` (top 20 only);
- ``chat first-token``: the chat endpoint (no prefill; wide logprobs);
- ``chat first-token top-k``: the chat endpoint, top 20 only;
- ``sampled N``: ``?template=chatml&sample=N`` for N in --samples (prefilled, N draws at T = 1).

Per path: mean and worst per-slot total variation from the embedded distribution, mean and worst
|dP(a wins)| (both with the embedded model's tau, so only the reads differ), mean label mass, calls.

    PYTHONPATH=src:. python benchmarks/bench_read_paths.py --pairs 10 --json read_paths.json
    PYTHONPATH=src:. python benchmarks/bench_read_paths.py --pairs 5 --samples 4,8,16,32 --only sampled
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))

from tests.support.llama_server import MODEL_ID, start_llama_server, stop_llama_server  # noqa: E402
from _common import dev_file  # noqa: E402
from veriscale.engine.store import Store  # noqa: E402
from veriscale.models.embedded import EmbeddedModel  # noqa: E402
from veriscale.models.embedded_files import default_gguf_path  # noqa: E402
from veriscale.models.uri import load_backend  # noqa: E402
from veriscale.verify.criteria import load_criteria  # noqa: E402
from veriscale.verify.reward import Verifier, sigmoid  # noqa: E402



def shortest_pairs(n: int) -> list[dict]:
    rows = [json.loads(line) for line in (dev_file("pairwise_dev.jsonl")).read_text("utf-8").splitlines() if line.strip()]
    rows.sort(key=lambda r: (len(r["instruction"]) + len(r["output_1"]) + len(r["output_2"]), r["id"]))
    return rows[:n]


def verdicts(model, pairs: list[dict], store: Store) -> list:
    crits = load_criteria("general")
    crits = crits.only([c.name for c in crits.items[:3]])
    v = Verifier(model, store=store, criteria=crits, repeats=2, injection_detect=False)
    out = []
    for n, r in enumerate(pairs, 1):
        out.append(v.compare(r["instruction"], r["output_1"], r["output_2"]))
        print(f"  pair {n}/{len(pairs)}", file=sys.stderr, flush=True)
    return out


def tv(p: dict, q: dict) -> float:
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def distance(exact: list, other: list) -> dict:
    tvs, dps, masses, strategies = [], [], [], set()
    for a, b in zip(exact, other):
        by = {(r.criterion, r.repeat, r.candidate): r for r in b.readings}
        for r in a.readings:
            o = by.get((r.criterion, r.repeat, r.candidate))
            if o is None or o.value is None or r.value is None:
                continue
            tvs.append(tv(r.label_probs, o.label_probs))
            masses.append(o.label_mass)
            strategies.add(o.strategy)
        if a.p_a_wins is not None and b.reward_a is not None and b.reward_b is not None:
            # the embedded model's tau on both sides: the rows differ only by how the slots were read
            dps.append(abs(a.p_a_wins - sigmoid((b.reward_a - b.reward_b) / a.tau)))
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    return {"slots": len(tvs), "tv_mean": mean(tvs), "tv_max": max(tvs) if tvs else None,
            "dp_mean": mean(dps), "dp_max": max(dps) if dps else None, "label_mass_mean": mean(masses),
            "strategies": sorted(strategies),
            "calls": sum(x.usage.model_calls for x in other),
            "failed_slots": sum(1 for x in other for r in x.readings if r.value is None)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--samples", default="4,8,16,32", help="sample counts for the sampled rows")
    ap.add_argument("--only", choices=("all", "logprobs", "sampled"), default="all")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    pairs = shortest_pairs(args.pairs)
    gguf = default_gguf_path()
    rows: dict[str, dict] = {}
    tmp = Path(tempfile.mkdtemp())
    proc, url = start_llama_server("--logits_all", "true")
    try:
        print("embedded (exact)", file=sys.stderr)
        exact = verdicts(EmbeddedModel.load(), pairs, Store.open(tmp / "embedded.sqlite3"))
        paths = []
        if args.only in ("all", "logprobs"):
            paths += [("completions exact", "?template=chatml"), ("completions top-k", "?template=chatml&read=top-k"),
                      ("chat first-token", ""), ("chat first-token top-k", "?read=top-k")]
        if args.only in ("all", "sampled"):
            paths += [(f"sampled {n}", f"?template=chatml&sample={n}") for n in args.samples.split(",")]
        for name, query in paths:
            sep = "&" if query else "?"
            uri = f"{url}{query}{sep}weights={gguf}#{MODEL_ID}"
            model = load_backend(uri)
            print(f"{name}: {model.read_plan().describe()}", file=sys.stderr)
            start = time.perf_counter()
            got = verdicts(model, pairs, Store.open(tmp / f"{name.replace(' ', '_')}.sqlite3"))
            rows[name] = {"read": model.read_plan().describe(), **distance(exact, got),
                          "wall_s": round(time.perf_counter() - start, 1)}
            print(json.dumps({name: rows[name]}), file=sys.stderr)
    finally:
        stop_llama_server(proc)
    print(f"{'path':<26} {'strategy':<14} {'slots':>5} {'TV mean':>8} {'TV max':>8} {'|dP| mean':>9} {'|dP| max':>8} {'mass':>6}")
    for name, r in rows.items():
        f = lambda x: "-" if x is None else f"{x:.4f}"  # noqa: E731
        print(f"{name:<26} {','.join(r['strategies']):<14} {r['slots']:>5} {f(r['tv_mean']):>8} {f(r['tv_max']):>8} "
              f"{f(r['dp_mean']):>9} {f(r['dp_max']):>8} {f(r['label_mass_mean']):>6}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"pairs": len(pairs), "criteria": 3, "orders": 2, "rows": rows},
                                                  indent=2))


if __name__ == "__main__":
    main()
