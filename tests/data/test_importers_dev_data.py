"""Importers on the real dev data: Terminal-Bench trials (ATIF), mini-swe-agent, the example pool."""

from __future__ import annotations

import gzip
import json
from collections import Counter

from tests.data.dev_data_paths import EXAMPLE_POOL, PROGRESS_DIR, TERMINAL_BENCH

from veriscale.data.importers import load_candidates, load_file
from veriscale.data.pool import group_by_task, load_pool, load_selection


def test_every_terminal_bench_trial_loads_with_its_reward_and_task(terminal_bench):
    raw = [json.loads(line) for line in gzip.open(TERMINAL_BENCH, "rt")]
    assert len(terminal_bench) == len(raw) == 445
    for candidate, record in zip(terminal_bench, raw):
        assert candidate.id == record["trial_name"]
        assert candidate.labels["reward"] == record["reward"]
        assert candidate.task.id == record["task_name"]
        # The opening user prompt becomes the task, the rest stay as steps.
        assert len(candidate.trajectory.steps) == len(record["trajectory"]["steps"]) - 1
    assert Counter(c.labels["reward"] for c in terminal_bench) == {1: 350, 0: 95}


def test_terminal_bench_task_text_drops_the_agent_scaffold(terminal_bench):
    first = terminal_bench[0]
    assert first.task.text.startswith("Your task is to implement an adaptive-rejection sampler")
    assert "Recommended Workflow" not in first.task.text
    assert "Recommended Workflow" in first.task.metadata["prompt"]


def test_terminal_bench_exit_codes_come_from_tool_results(terminal_bench):
    steps = terminal_bench[0].trajectory.steps
    assert steps[0].exit_code == 0
    timed_out = steps[2]  # apt-get hit the harness timeout
    assert timed_out.exit_code == -1
    assert "timed out after 30 seconds" in timed_out.observation
    assert timed_out.tool_calls[0]["name"] == "bash"
    assert timed_out.tool_calls[0]["arguments"]["keystrokes"].startswith("apt-get update")
    codes = Counter(s.exit_code for c in terminal_bench for s in c.trajectory.steps)
    assert codes[0] > 10_000 and codes[1] > 100 and codes[127] > 50


def test_terminal_bench_final_output_is_the_last_agent_message(terminal_bench):
    first = terminal_bench[0]
    assert first.trajectory.final_output == first.trajectory.steps[-1].text
    assert "All 8 tests PASS" in first.trajectory.final_output


def test_terminal_bench_pool_splits_by_task(terminal_bench):
    pool = group_by_task(terminal_bench)
    assert len(pool) == 89
    assert all(len(group.candidates) == 5 for group in pool.values())
    disagreeing = [k for k, g in pool.items() if len({c.labels["reward"] for c in g.candidates}) > 1]
    assert len(disagreeing) == 36
    group = pool["adaptive-rejection-sampler"]
    assert group.task.id == "adaptive-rejection-sampler"
    assert {c.task.id for c in group.candidates} == {"adaptive-rejection-sampler"}


def test_mini_swe_agent_records_load_with_commands_outputs_and_patch(swebench_trajs):
    assert len(swebench_trajs) == 60
    assert Counter(c.labels["resolved"] for c in swebench_trajs) == {True: 30, False: 30}
    first = swebench_trajs[0]
    assert first.task.id == "django__django-15037"
    assert first.task.text.startswith("Foreign key to a specific field is not handled in inspectdb")
    step = first.trajectory.steps[1]
    assert step.tool_calls == [{"name": "bash", "arguments": {"command": 'find django -name "*inspectdb*"'}}]
    assert step.exit_code == 0
    assert "django/core/management/commands/inspectdb.py" in step.observation
    assert first.text.startswith("diff --git a/django/core/management/commands/inspectdb.py")
    nonzero = sum(1 for c in swebench_trajs for s in c.trajectory.steps if s.exit_code not in (None, 0))
    assert nonzero > 50


def test_progress_folder_loads_both_terminus_trajectories_as_one_task():
    name, candidates = load_file(PROGRESS_DIR)
    assert name == "folder"
    assert sorted(c.labels["reward"] for c in candidates) == [0, 1]
    assert {c.task.id for c in candidates} == {"pytorch-model-cli"}
    failed = next(c for c in candidates if c.labels["reward"] == 0)
    # terminus-2 writes function_name/tool_call_id and plain-text observations.
    first_call = failed.trajectory.steps[0].tool_calls[0]
    assert first_call["name"] == "bash_command" and first_call["id"] == "call_0_1"
    assert any("g++: command not found" in s.observation for s in failed.trajectory.steps)
    assert failed.task.metadata["system"]  # the system step is kept with the task


def test_bundled_example_pool_is_one_task_with_disagreement():
    assert list(load_pool([EXAMPLE_POOL])) == ["merge-diff-arc-agi-task"]
    task, candidates = load_selection([EXAMPLE_POOL])
    assert task.id == "merge-diff-arc-agi-task"
    assert len(candidates) == 5
    assert sorted(c.labels["reward"] for c in candidates) == [0, 0, 1, 1, 1]
    assert all(c.trajectory.steps for c in candidates)
    assert load_candidates([EXAMPLE_POOL])[0].id == "merge-diff-arc-agi-task__5Yk2WfS"
