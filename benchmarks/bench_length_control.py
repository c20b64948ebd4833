"""The length-controlled reward on the dev pairs: accuracy and reward–length correlation, off vs residual.

    python benchmarks/bench_length_control.py                      # embedded, 24 pairs, Correctness
    python benchmarks/bench_length_control.py --pairs 60 --model http://host:8000/v1#judge --criteria general
    python benchmarks/bench_length_control.py --data /path/to/pairwise_dev.jsonl

Each LLMBar/MT-Bench dev pair is one GRPO group of two, ranked by ``GroupRewarder`` (both slot
orders). ``LengthControl`` (``length_control = "residual"``) then takes the within-group slope of
reward on log length out, pooled over all the pairs. Accuracy: the labelled better output gets
the higher reward (a tie counts half). Correlation: Pearson r of reward and log length (characters).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _common

from _common import Progress, dev_pairs  # noqa: E402
from veriscale.models.uri import load_backend  # noqa: E402
from veriscale.rewards.group import GroupRewarder  # noqa: E402
from veriscale.rewards.length import DEFAULT_WINDOW, LengthControl, correlation  # noqa: E402
from veriscale.verify.criteria import load_criteria  # noqa: E402
from veriscale.verify.reward import Verifier  # noqa: E402

DATA_CANDIDATES = [REPO.parent / "shared" / "data" / "pairwise_dev.jsonl",
                   REPO.parents[1] / "shared" / "data" / "pairwise_dev.jsonl"]


def accuracy(rewards: list, labels: list[int]) -> float:
    score = 0.0
    for (a, b), label in zip(zip(rewards[::2], rewards[1::2]), labels):
        better, worse = (a, b) if label == 1 else (b, a)
        score += 1.0 if better > worse else 0.5 if better == worse else 0.0
    return score / len(labels)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=24)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--criteria", default="Correctness", help="a criterion of 'general', or 'general' for all")
    ap.add_argument("--max-chars", type=int, default=2500)
    ap.add_argument("--data", type=Path, default=next((p for p in DATA_CANDIDATES if p.exists()), DATA_CANDIDATES[0]))
    args = ap.parse_args()
    criteria = load_criteria("general") if args.criteria == "general" else load_criteria("general").only([args.criteria])
    verifier = Verifier(load_backend(args.model), scale="letters:5", criteria=criteria)
    rewarder = GroupRewarder(verifier)
    rows = dev_pairs(args.pairs, args.max_chars, args.data)
    rewards, lengths, groups, labels = [], [], [], []
    start = time.monotonic()
    tick = Progress("length control", len(rows), "pair")
    for i, row in enumerate(rows):
        result = rewarder.group(row["instruction"], [row["output_1"], row["output_2"]])
        tick()
        rewards += result.rewards
        lengths += [len(row["output_1"]), len(row["output_2"])]
        groups += [i, i]
        labels.append(int(row["label"]))
    wall = time.monotonic() - start
    ok = [r is not None for r in rewards]
    kept = [i for i in range(0, len(rewards), 2) if ok[i] and ok[i + 1]]
    rewards_k = [rewards[j] for i in kept for j in (i, i + 1)]
    lengths_k = [lengths[j] for i in kept for j in (i, i + 1)]
    groups_k = [groups[j] for i in kept for j in (i, i + 1)]
    labels_k = [labels[i // 2] for i in kept]
    control = LengthControl(window=max(DEFAULT_WINDOW, len(rewards_k)))
    adjusted = control.adjust(rewards_k, lengths_k, groups_k)
    longer_better = sum(1 for i, lab in zip(range(0, len(lengths_k), 2), labels_k)
                        if (lengths_k[i] > lengths_k[i + 1]) == (lab == 1)) / max(len(labels_k), 1)
    out = {
        "model": args.model, "criteria": args.criteria, "pairs": len(rows), "pairs_scored": len(labels_k),
        "wall_s": round(wall, 1), "labelled_better_is_longer": round(longer_better, 3),
        "slope_per_log_char": None if control.slope is None else round(control.slope, 4),
        "off": {"accuracy": round(accuracy(rewards_k, labels_k), 3),
                "reward_length_corr": round(correlation(rewards_k, lengths_k) or 0.0, 3)},
        "residual": {"accuracy": round(accuracy(adjusted, labels_k), 3),
                     "reward_length_corr": round(correlation(adjusted, lengths_k) or 0.0, 3)},
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
