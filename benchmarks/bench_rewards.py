"""RL rewards: throughput for a GRPO group, the reward's share of a TRL step, and the spread of
group-relative vs pointwise rewards on groups where every completion is wrong.

    python benchmarks/bench_rewards.py [--problems 6] [--group 8] [--trl-steps 3] [--json out.json]

Groups are real: the policy is SmolLM2-135M-Instruct itself (llama-cpp, temperature 1, a seed
per completion) answering GSM8K problems from the ProcessBench dev file whose reference
solution is marked correct (its ``\\boxed{}`` answer is the gold answer). At 135M parameters it
is almost always wrong, which is the GRPO failure the group-relative reward addresses: a group
counts as all-wrong when no completion contains the gold number. Each group is rewarded with
the embedded judge, cold (no store), three ways: ``discrete`` (pointwise, the most likely
label's value: the usual LLM-judge reward), ``pointwise`` (the expected label value) and
``group`` (round robin + Bradley–Terry within the group).

Reported per mode: rewards per second (completions / wall seconds), model calls per group, the
within-group standard deviation and range of the rewards (GRPO divides advantages by the std:
with a std near 0 the group has no signal), and the share of groups whose std is below 0.01.
The TRL part runs a real ``GRPOTrainer`` on the tiny in-memory policy of
``tests/support/tiny_policy.py`` with ``TRLReward`` on the embedded judge and reports the share
of the training wall time spent inside the reward function.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import Progress, dev_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support.tiny_policy

from veriscale.models.embedded import EmbeddedModel, default_gguf_path
from veriscale.rewards import BatchRewarder, TRLReward
from veriscale.verify.reward import Verifier

SCALE = "letters:5"


def gsm8k_problems(n: int) -> list[tuple[str, str]]:
    """(problem, gold answer) for the first n GSM8K items whose reference solution is correct."""
    out = []
    rows = (dev_file("progress_processbench_dev.jsonl")).read_text().splitlines()
    for row in map(json.loads, rows):
        if row["split"] != "gsm8k" or row["label"] != -1 or not row["final_answer_correct"]:
            continue
        boxed = re.search(r"\\boxed\{\$?([^}]*)\}", row["steps"][-1])
        if boxed:
            out.append((row["problem"], boxed.group(1).replace(",", "").strip()))
        if len(out) == n:
            break
    return out


def sample_group(policy, problem: str, size: int) -> list[str]:
    messages = [{"role": "user", "content": problem + "\nThink step by step, then give the final number."}]
    return [policy.create_chat_completion(messages, temperature=1.0, seed=seed, max_tokens=160)
            ["choices"][0]["message"]["content"] for seed in range(size)]


def wrong(completion: str, gold: str) -> bool:
    return gold not in re.sub(r"(?<=\d),(?=\d)", "", completion)


def spread(rewards: list[float | None]) -> tuple[float, float]:
    values = [r for r in rewards if r is not None]
    return (statistics.pstdev(values), max(values) - min(values)) if len(values) > 1 else (0.0, 0.0)


#: mode name -> (BatchRewarder mode, argmax judge?): "discrete" is the usual pointwise judge
#: reward, the most likely label's value, which an all-wrong group tends to collapse onto
MODES = {"discrete": ("pointwise", True), "pointwise": ("pointwise", False), "group": ("group", False)}


def reward_rows(groups: list[tuple[str, list[str]]], judge: EmbeddedModel, modes: list[str]) -> dict:
    rows = {}
    for name in modes:
        mode, discrete = MODES[name]
        seconds, calls, stds, ranges, failed = 0.0, 0, [], [], 0
        tick = Progress(f"rewards {name}", len(groups), "group")
        for problem, completions in groups:
            rewarder = BatchRewarder(Verifier(judge, scale=SCALE, discrete=discrete), mode=mode)
            start = time.perf_counter()
            batch = rewarder.rewards([problem] * len(completions), completions)
            seconds += time.perf_counter() - start
            calls += batch.usage.model_calls
            failed += batch.failed
            std, rng = spread(batch.rewards)
            stds.append(std)
            ranges.append(rng)
            tick()
        n = sum(len(c) for _, c in groups)
        rows[name] = {"rewards_per_s": n / seconds, "model_calls_per_group": calls / len(groups),
                      "mean_std": statistics.mean(stds), "mean_range": statistics.mean(ranges),
                      "collapsed_share": sum(s < 0.01 for s in stds) / len(stds), "failed": failed}
    return rows


def trl_share(judge: EmbeddedModel, steps: int) -> dict:
    from tests.support.tiny_policy import grpo_trainer

    class Timed(TRLReward):
        seconds = 0.0

        def __call__(self, prompts, completions, **kwargs):
            start = time.perf_counter()
            try:
                return super().__call__(prompts, completions, **kwargs)
            finally:
                Timed.seconds += time.perf_counter() - start

    reward = Timed(Verifier(judge, scale=SCALE))
    with tempfile.TemporaryDirectory() as tmp:
        trainer = grpo_trainer(reward, Path(tmp), steps=steps, generations=8, completion_tokens=32)
        start = time.perf_counter()
        trainer.train()
        total = time.perf_counter() - start
    return {"steps": steps, "group": 8, "reward_share": Timed.seconds / total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=6)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--trl-steps", type=int, default=3, help="0: skip the TRL run")
    parser.add_argument("--modes", default="discrete,pointwise,group", help="of: " + ", ".join(MODES))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from llama_cpp import Llama

    policy = Llama(model_path=str(default_gguf_path()), n_ctx=2048, verbose=False)
    groups, all_wrong = [], 0
    for problem, gold in gsm8k_problems(args.problems):
        completions = sample_group(policy, problem, args.group)
        if all(wrong(c, gold) for c in completions):
            all_wrong += 1
            groups.append((problem, completions))
    del policy
    print(f"{all_wrong} of {args.problems} GSM8K groups of {args.group} are all wrong", file=sys.stderr)
    if not groups:
        raise SystemExit("no all-wrong group: raise --problems")
    judge = EmbeddedModel.load()
    modes = [m for m in args.modes.split(",") if m]
    if unknown := [m for m in modes if m not in MODES]:
        raise SystemExit(f"unknown mode {unknown[0]!r}: use {', '.join(MODES)}")
    result = {"groups": len(groups), "group_size": args.group, "modes": reward_rows(groups, judge, modes),
              "trl": trl_share(judge, args.trl_steps) if args.trl_steps else None}
    print(f"{'mode':<10} {'rewards/s':>9} {'calls/group':>11} {'std':>6} {'range':>6} {'std<0.01':>8}")
    for mode, row in result["modes"].items():
        print(f"{mode:<10} {row['rewards_per_s']:>9.2f} {row['model_calls_per_group']:>11.0f} {row['mean_std']:>6.3f} "
              f"{row['mean_range']:>6.3f} {row['collapsed_share']:>8.0%}")
    rows = result["modes"]
    if "group" in rows and "pointwise" in rows:
        p, g = rows["pointwise"], rows["group"]
        print(f"group/pointwise: std x{g['mean_std'] / max(p['mean_std'], 1e-9):.2f}, "
              f"throughput x{g['rewards_per_s'] / p['rewards_per_s']:.3f}")
    if result["trl"]:
        print(f"TRL smoke run ({args.trl_steps} steps, group of 8): reward share {result['trl']['reward_share']:.0%}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
