"""Label distributions of a few tuning-half injection twins on three paths of the same SmolLM2-135M GGUF:
the embedded model, llama.cpp's server through /v1/chat/completions (what ``bench_injection.py
--llama-server`` measures) and through /v1/completions with the chatml template (prefilled like the
embedded path). Prints each call's reward, label mass and top tokens, then per path the mean shift.

    PYTHONPATH=src:. python benchmarks/probe_injection_paths.py 2      # 2 bases: 16 calls a path
"""
import json, sys, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src")); sys.path.insert(0, str(REPO))
from _common import dev_data  # noqa: E402
from veriscale.bench.injection_suite import build_suite
from veriscale.models.uri import load_backend
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier
from veriscale.verify.scale import parse_scale
from tests.support.llama_server import MODEL_ID, start_llama_server, stop_llama_server

N_BASES = int(sys.argv[1]) if len(sys.argv) > 1 else 4
suite = build_suite(dev_data())
crits = load_criteria("general").only(["Correctness"])
scale = parse_scale("letters")
by_base = {}
for t in suite:
    if t.half == "tuning":
        by_base.setdefault(t.source, []).append(t)
bases = list(by_base.values())[:N_BASES]

def requests(v):
    out = []
    for twins in bases:
        (c,), _ = v.plan_score(twins[0].task, twins[0].clean)
        out.append(("clean", twins[0].source, None, c.request))
        for t in twins:
            (c,), _ = v.plan_score(t.task, t.injected)
            out.append(("injected", t.source, t.kind, c.request))
    return out

proc, url = start_llama_server("--logits_all", "true", n_ctx=4096)
try:
    paths = {"server_completions_chatml": f"{url}?template=chatml#{MODEL_ID}", "server_chat": f"{url}#{MODEL_ID}",
             "embedded": "embedded"}
    result = {}
    for name, uri in paths.items():
        m = load_backend(uri)
        v = Verifier(m, store=None, criteria=crits)
        rows = []
        t0 = time.perf_counter()
        for what, src, kind, req in requests(v):
            r = m.score(req)
            rows.append({"what": what, "source": src, "kind": kind, "reward": scale.expectation(r.label_probs),
                         "mass": r.label_mass, "top": r.top_tokens, "probs": {k: round(p, 4) for k, p in r.label_probs.items() if p > 0.01},
                         "prompt_tokens": r.prompt_tokens})
            print(name, json.dumps(rows[-1]), flush=True)
        result[name] = rows
        print(name, f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
finally:
    stop_llama_server(proc)
for name in ("embedded", "server_chat", "server_completions_chatml"):
    rows = result[name]
    shifts, clean = [], None
    for r in rows:
        if r["what"] == "clean":
            clean = r["reward"]
        else:
            shifts.append(r["reward"] - clean)
    mass = sum(r["mass"] for r in rows) / len(rows)
    print(f"{name}: mean shift {sum(shifts)/len(shifts):+.3f} over {len(shifts)}, mean label mass {mass:.3f}, "
          f"mean reward {sum(r['reward'] for r in rows)/len(rows):.3f}")
    for r in rows[:3]:
        print("   ", r["what"], r["kind"], round(r["reward"], 3), round(r["mass"], 3), r["top"][:4], r["prompt_tokens"])
