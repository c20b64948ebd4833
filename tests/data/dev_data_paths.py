"""Where the real dev data and the bundled example pool live (read-only)."""

from __future__ import annotations

from pathlib import Path

DEV_DATA = Path("/work/shared/data")
TERMINAL_BENCH = DEV_DATA / "terminal_bench_2.1_trials.jsonl.gz"
SWEBENCH_TRAJS = DEV_DATA / "swebench_verified_trajectories_dev.jsonl.gz"
PROGRESS_DIR = DEV_DATA / "progress_pytorch_model_cli"
EXAMPLE_POOL = Path(__file__).resolve().parents[2] / "examples" / "terminal_bench" / "merge-diff-arc-agi-task.jsonl"
