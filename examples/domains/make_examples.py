"""Rebuild the real-data examples of examples/domains/ from the dev data in shared/data.

    python examples/domains/make_examples.py /work/shared/data

Writes general/ (LLMBar pair), terminal/ (two Terminal-Bench 2.1 trials, excerpted), swe/
(one SWE-bench Verified trajectory, excerpted) and math/ (one ProcessBench solution). The
synthetic examples (web, medical, office, robot) are hand-written and not touched.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GENERAL_ID = "LLMBar/Natural#72"
TERMINAL = ("kv-store-grpc__5ABR7pN", "kv-store-grpc__C2X7s7b")  # reward 0, reward 1
TERMINAL_KEEP = 5  # the first user step, then the last steps of each trial
SWE_ID = "sympy__sympy-24539"
MATH_ID = "gsm8k-69"


def _cut(text: str, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 40] + f" [... {len(text) - limit + 40} chars cut]"


def _ends(text: str, head: int, tail: int) -> str:
    if len(text) <= head + tail:
        return text
    return text[:head] + f"\n[... {len(text) - head - tail} chars cut ...]\n" + text[-tail:]


def _rows(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def general(data: Path) -> None:
    row = next(r for r in _rows(data / "pairwise_dev.jsonl") if r["id"] == GENERAL_ID)
    (HERE / "general/task.md").write_text(row["instruction"] + "\n")
    (HERE / "general/a.md").write_text(row["output_1"] + "\n")
    (HERE / "general/b.md").write_text(row["output_2"] + "\n")


def _excerpt_step(step: dict, limit: int) -> dict:
    out = {k: step[k] for k in ("step_id", "source") if k in step}
    out["message"] = _cut(step.get("message") or "", limit)
    if step.get("tool_calls"):
        out["tool_calls"] = [{"tool_name": c.get("tool_name", "bash"),
                              "arguments": {k: _cut(str(v), limit) for k, v in (c.get("arguments") or {}).items()}}
                             for c in step["tool_calls"]]
    if step.get("observation"):
        out["observation"] = {"results": [{"content": _cut(r.get("content") or "", limit)}
                                          for r in step["observation"].get("results", [])]}
    return out


def terminal(data: Path) -> None:
    rows = {r["trial_name"]: r for r in _rows(data / "terminal_bench_2.1_trials.jsonl.gz") if r["trial_name"] in TERMINAL}
    lines = []
    for name in TERMINAL:
        row = rows[name]
        steps = row["trajectory"]["steps"]
        first = dict(steps[0], message=steps[0]["message"].split("\n\nYou can execute bash commands")[0])
        kept = [_excerpt_step(first, 2500)] + [_excerpt_step(s, 260) for s in steps[-TERMINAL_KEEP:]]
        traj = {k: row["trajectory"][k] for k in ("schema_version", "session_id", "agent")}
        traj["steps"] = kept
        lines.append(json.dumps({"trial_name": name, "task_name": row["task_name"], "reward": row["reward"],
                                 "trajectory": traj}, ensure_ascii=False))
    (HERE / "terminal/kv-store-grpc.jsonl").write_text("\n".join(lines) + "\n")


def swe(data: Path) -> None:
    row = next(r for r in _rows(data / "swebench_verified_trajectories_dev.jsonl.gz") if r["instance_id"] == SWE_ID)
    (HERE / "swe/task.md").write_text(f"Resolve this issue in the {SWE_ID.split('__')[0]} repository "
                                      f"({SWE_ID}):\n\n{_cut(row['problem_statement'], 1500)}\n")
    runs = [s["content"] for s in row["steps"] if s["role"] == "user" and "test process starts" in (s.get("content") or "")]
    last = _ends(runs[-1], 250, 450) if runs else "(the run shows no test run)"
    (HERE / "swe/candidate.md").write_text(
        f"Final patch ({row['system']}, {row['n_steps']} steps, exit status {row['exit_status']}):\n\n"
        f"```diff\n{_cut(row['final_patch'], 2500)}\n```\n\nThe run's last test run, `bin/test` (excerpt):\n\n"
        f"```\n{last}\n```\n")


def math(data: Path) -> None:
    row = next(r for r in _rows(data / "progress_processbench_dev.jsonl") if r["id"] == MATH_ID)
    (HERE / "math/task.md").write_text(row["problem"] + "\n")
    steps = "\n\n".join(f"Step {i}: {s}" for i, s in enumerate(row["steps"]))
    (HERE / "math/solution.md").write_text(steps + "\n")


if __name__ == "__main__":
    source = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data")
    for build in (general, terminal, swe, math):
        build(source)
