"""Each importer on a small hand-written fixture of its format (no dev data exists for these)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from veriscale.data.importers import detect_format, load_candidates, load_file
from veriscale.data.pool import load_pool, load_selection
from veriscale.data.render import render_candidate

FIXTURES = Path(__file__).parent / "fixtures"


def test_inspect_json_log_gives_one_candidate_per_epoch_with_scores():
    name, candidates = load_file(FIXTURES / "inspect_log.json")
    assert name == "inspect-log"
    assert [c.id for c in candidates] == ["openai/gpt-4o-mini/epoch-1", "openai/gpt-4o-mini/epoch-2"]
    assert [c.labels["includes"] for c in candidates] == ["C", "I"]
    assert [c.labels["score"] for c in candidates] == [1.0, 0.0]
    good, bad = candidates
    assert good.task.id == "sort_numbers/sort-1"
    assert good.task.text.startswith("Sort the numbers")
    assert good.task.metadata["target"] == "1 2 3"
    assert good.trajectory.final_output == "Done: sorted.txt holds 1 2 3."
    call = bad.trajectory.steps[0].tool_calls[0]
    assert call == {"name": "bash", "arguments": {"cmd": "sort -n numbers.txt > sorted.txt"}, "id": "call_2"}
    assert "No such file or directory" in bad.trajectory.steps[0].observation
    assert "[tool error: unknown] exit status 2" in bad.trajectory.steps[0].observation


def test_inspect_eval_zip_reads_header_and_samples(tmp_path):
    log = json.loads((FIXTURES / "inspect_log.json").read_text())
    archive = tmp_path / "run.eval"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("header.json", json.dumps({"eval": log["eval"], "status": "success"}))
        for sample in log["samples"]:
            zf.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", json.dumps(sample))
    name, candidates = load_file(archive)
    assert name == "inspect-log"
    assert [c.labels["includes"] for c in candidates] == ["C", "I"]
    assert {c.task.id for c in candidates} == {"sort_numbers/sort-1"}


def test_swebench_predictions_group_by_instance_and_name_runs_by_model():
    pool = load_pool([FIXTURES / "swebench_predictions.jsonl"])
    assert list(pool) == ["pkg__pkg-101", "pkg__pkg-202"]
    first = pool["pkg__pkg-101"]
    assert [c.id for c in first.candidates] == ["agent-a", "agent-b"]
    assert "+x = 3" in first.candidates[1].text
    assert first.task.text == "Resolve SWE-bench instance pkg__pkg-101."
    assert pool["pkg__pkg-202"].candidates[0].text == ""


def test_swebench_predictions_as_one_json_dict(tmp_path):
    path = tmp_path / "preds.json"
    path.write_text(json.dumps({"pkg__pkg-1": {"model_patch": "diff", "model_name_or_path": "m"}}))
    (candidate,) = load_candidates([path])
    assert candidate.task.id == "pkg__pkg-1" and candidate.text == "diff"


def test_classic_swe_agent_traj_keeps_actions_observations_and_submission():
    name, (candidate,) = load_file(FIXTURES / "pkg__pkg-101.traj")
    assert name == "swe-agent"
    steps = candidate.trajectory.steps
    assert len(steps) == 4
    assert steps[1].tool_calls == [{"name": "bash", "arguments": {"command": "python reproduce.py"}}]
    assert steps[1].text == "Reproduce the bug first."
    assert "ValueError: bad x" in steps[1].observation
    assert candidate.text.startswith("diff --git a/m.py")
    assert "m.x should be 2" in candidate.task.text  # the demo message is skipped
    assert candidate.metadata["exit_status"] == "submitted"


def test_openai_messages_list_attaches_tool_results_to_their_call():
    name, (candidate,) = load_file(FIXTURES / "openai_chat.json")
    assert name == "openai-messages"
    assert candidate.task.text == "How many lines does data.csv have?"
    assert candidate.task.metadata["system"] == "You can call tools."
    step = candidate.trajectory.steps[0]
    assert step.tool_calls == [{"name": "run_shell", "arguments": {"command": "wc -l data.csv"}, "id": "call_1"}]
    assert step.exit_code == 0 and "42 data.csv" in step.observation
    assert candidate.trajectory.final_output == "data.csv has 42 lines."


def test_openai_messages_jsonl_one_run_per_line_with_rewards():
    task, candidates = load_selection([FIXTURES / "openai_runs.jsonl"])
    assert [c.id for c in candidates] == ["run-1", "run-2"]
    assert [c.labels["reward"] for c in candidates] == [1, 0]
    assert task.text == "How many lines does data.csv have?"


def test_openai_jsonl_of_single_messages_is_one_conversation(tmp_path):
    messages = json.loads((FIXTURES / "openai_chat.json").read_text())
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    (candidate,) = load_candidates([path])
    assert candidate.trajectory.final_output == "data.csv has 42 lines."


def test_diff_and_text_files_are_one_candidate_each():
    (patch,) = load_candidates([FIXTURES / "fix_constant.patch"])
    assert patch.id == "fix_constant" and patch.text.startswith("diff --git")
    assert patch.artifacts == {"patch": str(FIXTURES / "fix_constant.patch")}
    answers = load_candidates([FIXTURES / "answer_a.md", FIXTURES / "answer_b.txt"])
    assert [c.id for c in answers] == ["answer_a", "answer_b"]
    assert answers[0].task is None and "**42**" in answers[0].text


def test_diff_content_without_suffix_is_detected(tmp_path):
    path = tmp_path / "change"
    path.write_text((FIXTURES / "fix_constant.patch").read_text())
    assert detect_format(path) == "diff"


def test_harbor_job_folder_reads_each_trial_folder_as_a_rollout():
    name, candidates = load_file(FIXTURES / "harbor_job")
    assert name == "folder"
    assert [c.id for c in candidates] == ["run-1", "run-2"]
    run1, run2 = candidates
    assert run1.labels == {"reward": 1.0}
    assert run1.task.id == "hello-file" and run1.task.text == "Create hello.txt containing hi."
    assert run1.trajectory.steps[0].tool_calls[0]["arguments"]["keystrokes"] == "echo hi > hello.txt\n"
    assert "agent/trajectory.json" in run1.artifacts
    assert run2.labels == {"reward": 0.0}
    assert run2.text == "I could not create the file.\n"
    assert run2.task.text == "Create hello.txt containing hi."  # from the job's task.md
    assert run2.trajectory is None
    assert "could not create the file" in render_candidate(run2, 200)


def test_folder_of_files_loads_each_file(tmp_path):
    for name, text in [("a.md", "first"), ("b.md", "second"), ("task.md", "Say something.")]:
        (tmp_path / name).write_text(text)
    task, candidates = load_selection([tmp_path])
    assert [c.text for c in candidates] == ["first", "second"]
    assert task.text == "Say something."


def test_atif_trajectory_given_as_json_string(tmp_path):
    trial = json.loads((FIXTURES / "harbor_job" / "run-1" / "agent" / "trajectory.json").read_text())
    path = tmp_path / "trial.json"
    path.write_text(json.dumps({"trial_name": "t1", "task_name": "hello-file", "reward": 1,
                                "trajectory": json.dumps(trial)}))
    (candidate,) = load_candidates([path])
    assert candidate.id == "t1" and candidate.labels == {"reward": 1}
    assert candidate.trajectory.final_output == "Done."


@pytest.mark.parametrize("fmt", ["text", "atif"])
def test_explicit_format_overrides_detection(fmt, tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"trial_name": "x", "trajectory": {"steps": [{"source": "agent", "message": "hi"}]}}))
    name, (candidate,) = load_file(path, format=fmt)
    assert name == fmt
    assert (candidate.text.startswith("{") if fmt == "text" else candidate.text == "hi")
