"""The injection detectors on the blind ``heldout2`` half: recall per kind and per obfuscation, and
false positives on clean dev candidates. Prints aggregates only (never a held-out template or twin).

    python benchmarks/bench_injection_heldout2.py                        # the pattern detector
    python benchmarks/bench_injection_heldout2.py --json before.json     # and the figures as JSON
    python benchmarks/bench_injection_heldout2.py --model-check --json model.json   # + the model-based check
    python benchmarks/bench_injection_heldout2.py --model-check --model embedded --max-chars 1200 --store /tmp/s.sqlite3

The held-out half is ``injection_suite.heldout_v2_twins`` (110 twins, written blind to the
detector): its recall is reported in aggregate with a Wilson 95 % interval. The old halves
(``build_suite``: ``tuning`` and ``heldout``) are tuning data for every detector here and are
reported as tuning figures. The clean set is ``clean_candidates`` with the agent trajectories
rendered with their tool output (``--clean``: how many, 0 = all, at least 1,000).

``--model-check`` also runs :mod:`veriscale.verify.injection_model` (one yes/no call a text,
through the gateway and a store, so a rerun resumes from the cache). Its threshold is chosen on
the old halves and the clean set only (``--threshold`` fixes it instead): the threshold that keeps
clean false positives at most ``--max-fpr``, highest old-half recall. The held-out half's P(yes)
are only ever aggregated.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from _common import dev_data  # noqa: E402
from veriscale.bench.injection_suite import (HALVES, HELDOUT_V2, KINDS_V2, build_suite,  # noqa: E402
                                             clean_candidates, heldout_v2_templates, heldout_v2_twins)
from veriscale.data.render import render_candidate  # noqa: E402
from veriscale.verify.injection import DETECT_BY_DEFAULT, detect  # noqa: E402

MAX_FPR = 0.05


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float, float]:
    """(k/n, low, high): the Wilson score interval."""
    if n == 0:
        return (float("nan"),) * 3
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return p, max(0.0, centre - half), min(1.0, centre + half)


def figure(k: int, n: int) -> dict:
    p, lo, hi = wilson(k, n)
    return {"k": k, "n": n, "rate": p, "wilson95": [lo, hi]}


def pct(f: dict) -> str:
    lo, hi = f["wilson95"]
    return f"{f['k']} of {f['n']} ({100 * f['rate']:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}])"


def grouped(hits: list[bool], groups: list[str]) -> dict[str, dict]:
    by: dict[str, list[bool]] = defaultdict(list)
    for h, g in zip(hits, groups):
        by[g].append(h)
    return {g: figure(sum(v), len(v)) for g, v in sorted(by.items())}


def held_out(hits: list[bool], twins, obfuscation: dict[int, str]) -> dict:
    """Aggregates of one detector on the held-out half: all, per kind, per obfuscation."""
    return {"all": figure(sum(hits), len(hits)),
            "per_kind": grouped(hits, [t.kind for t in twins]),
            "per_obfuscation": grouped(hits, [obfuscation[t.template] for t in twins])}


def report(name: str, res: dict) -> None:
    print(f"\n== {name}")
    print(f"held-out ({HELDOUT_V2}) recall: {pct(res['heldout2']['all'])}")
    for what in ("per_kind", "per_obfuscation"):
        print(f"  {what}: " + "; ".join(f"{g} {f['k']}/{f['n']}" for g, f in res["heldout2"][what].items()))
    for half, f in res["old_halves_tuning"].items():
        print(f"old half '{half}' (tuning figure) recall: {pct(f)}")
    print(f"clean false positives: {pct(res['clean'])}  by rule: {res.get('clean_by_rule', {})}")


def choose_threshold(old: list[float], clean: list[float], max_fpr: float) -> float:
    """The lowest threshold (so the highest old-half recall) whose clean false-positive rate is at most max_fpr."""
    best = 1.0 + 1e-9
    for t in sorted(set(old + clean), reverse=True):
        if sum(s >= t for s in clean) / len(clean) <= max_fpr:
            best = t
        else:
            break
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, help="write the aggregates here")
    ap.add_argument("--clean", type=int, default=0, help="clean candidates (0: all; at least 1,000)")
    ap.add_argument("--render-chars", type=int, default=6000, help="agent trajectories rendered to this many chars")
    ap.add_argument("--examples", type=int, default=10, help="clean false positives listed (clean texts only)")
    ap.add_argument("--model-check", action="store_true", help="also measure the model-based check")
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--store", default=str(Path(os.environ.get("TMPDIR", "/tmp")) / "veriscale-injection-model.sqlite3"))
    ap.add_argument("--max-chars", type=int, default=None, help="model check: text kept per call (head + tail)")
    ap.add_argument("--threshold", type=float, default=None, help="model check: fix the threshold")
    ap.add_argument("--max-fpr", type=float, default=MAX_FPR)
    args = ap.parse_args()

    started = time.perf_counter()
    twins = heldout_v2_twins(dev_data())
    obfuscation = {n: t.get("obfuscation", "none") for n, t in enumerate(heldout_v2_templates())}
    old = [t for t in build_suite(dev_data()) if t.half in HALVES]
    clean = clean_candidates(dev_data(), args.clean, render=lambda c: render_candidate(c, args.render_chars))
    if len(clean) < 1000:
        raise SystemExit(f"only {len(clean)} clean candidates: at least 1,000 are needed")
    assert {t.kind for t in twins} <= set(KINDS_V2)

    out: dict = {"heldout2_twins": len(twins), "old_twins": len(old), "clean_candidates": len(clean),
                 "agent_trajectories": sum(i.startswith(("terminal:", "swebench:")) for i, _ in clean),
                 "detect_by_default": DETECT_BY_DEFAULT, "cpus": os.cpu_count()}

    # the pattern detector
    t0 = time.perf_counter()
    hits2 = [detect(t.injected) is not None for t in twins]
    clean_hits = [(i, detect(x)) for i, x in clean]
    fps = [(i, h.rule, h.text) for i, h in clean_hits if h]
    by_rule: dict[str, int] = defaultdict(int)
    for _, rule, _ in fps:
        by_rule[rule] += 1
    patterns = {
        "heldout2": held_out(hits2, twins, obfuscation),
        "old_halves_tuning": {h: figure(sum(detect(t.injected) is not None for t in old if t.half == h),
                                        sum(t.half == h for t in old)) for h in HALVES},
        "clean": figure(len(fps), len(clean)), "clean_by_rule": dict(by_rule),
        "clean_examples": fps[:args.examples], "wall_s": round(time.perf_counter() - t0, 2)}
    out["patterns"] = patterns
    report("pattern detector (veriscale.verify.injection.detect)", patterns)
    for i, rule, text in fps[:args.examples]:
        print(f"  clean FP {i}: {rule}: {text[:100]!r}")

    def save() -> None:
        if args.json:
            args.json.write_text(json.dumps(out, indent=1, ensure_ascii=False))

    save()
    if args.model_check:
        out["model_check"] = model_check(args, twins, obfuscation, old, clean, hits2, [h is not None for _, h in clean_hits], save)
    out["wall_s"] = round(time.perf_counter() - started, 1)
    save()


def model_check(args, twins, obfuscation, old, clean, hits2, clean_pattern, save) -> dict:
    from veriscale.engine.store import Store
    from veriscale.models.uri import load_backend
    from veriscale.verify import injection_model as im

    model = load_backend(args.model)
    checker = im.ModelCheck(model, Store.open(args.store), **({"max_chars": args.max_chars} if args.max_chars else {}))
    t0 = time.perf_counter()
    texts = [("old", t.injected) for t in old] + [("clean", x) for _, x in clean] + [("heldout2", t.injected) for t in twins]
    scores: list[float | None] = []
    step = 50
    for k in range(0, len(texts), step):
        scores += checker.scores([x for _, x in texts[k:k + step]])
        done = len(scores)
        print(f"model check: {done} of {len(texts)} texts ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    s_old, s_clean = scores[:len(old)], scores[len(old):len(old) + len(clean)]
    s_held = scores[len(old) + len(clean):]
    failed = sum(s is None for s in scores)
    val = lambda s: -1.0 if s is None else s  # noqa: E731  (a failed call never flags)
    s_old, s_clean, s_held = [val(s) for s in s_old], [val(s) for s in s_clean], [val(s) for s in s_held]
    chosen = args.threshold if args.threshold is not None else choose_threshold(s_old, s_clean, args.max_fpr)
    flag_held = [s >= chosen for s in s_held]
    flag_clean = [s >= chosen for s in s_clean]
    union_held = [a or b for a, b in zip(flag_held, hits2)]
    union_clean = [a or b for a, b in zip(flag_clean, clean_pattern)]
    def auc(pos: list[float], neg: list[float]) -> float:
        """A threshold-free figure of separation: P(a positive's score > a negative's), ties half."""
        ranked = sorted([(v, 1) for v in pos] + [(v, 0) for v in neg])
        rank_sum, i = 0.0, 0
        while i < len(ranked):
            j = i
            while j < len(ranked) and ranked[j][0] == ranked[i][0]:
                j += 1
            rank_sum += (i + j + 1) / 2 * sum(lab for _, lab in ranked[i:j])
            i = j
        return (rank_sum - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))

    res = {
        "model": model.uri, "max_chars": checker.max_chars, "threshold": chosen,
        "threshold_rule": "fixed" if args.threshold is not None else f"lowest with clean FPR <= {args.max_fpr} (old halves + clean only)",
        "failed_calls": failed, "calls": checker.usage_calls(), "wall_s": round(time.perf_counter() - t0, 1),
        "auc_old_vs_clean_tuning": auc(s_old, s_clean), "auc_heldout2_vs_clean": auc(s_held, s_clean),
        "heldout2": held_out(flag_held, twins, obfuscation),
        "old_halves_tuning": {h: figure(sum(s >= chosen for s, t in zip(s_old, old) if t.half == h),
                                        sum(t.half == h for t in old)) for h in HALVES},
        "clean": figure(sum(flag_clean), len(clean)),
        "mean_p_yes": {"old": sum(s_old) / len(s_old), "clean": sum(s_clean) / len(s_clean), "heldout2": sum(s_held) / len(s_held)},
        "union_with_patterns": {"heldout2": held_out(union_held, twins, obfuscation),
                                "clean": figure(sum(union_clean), len(clean))},
    }
    report(f"model-based check ({model.uri}, threshold {chosen:.4f})", res)
    print(f"AUC old halves vs clean (tuning): {res['auc_old_vs_clean_tuning']:.3f}; held-out vs clean: {res['auc_heldout2_vs_clean']:.3f}")
    u = res["union_with_patterns"]
    print(f"patterns OR model: held-out recall {pct(u['heldout2']['all'])}, clean false positives {pct(u['clean'])}")
    return res


if __name__ == "__main__":
    main()
