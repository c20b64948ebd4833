"""Bad inputs end in one UserError sentence that names the file (and line) and the fix."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from veriscale.data.importers import FORMATS, load_candidates, load_file
from veriscale.data.model import Candidate, Task
from veriscale.data.pool import load_pool, load_selection, require_single_task
from veriscale.errors import UserError

FIXTURES = Path(__file__).parent / "fixtures"


def test_empty_file_is_refused_by_name(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text("\n  \n")
    with pytest.raises(UserError, match=r"'.*runs\.jsonl' is empty"):
        load_candidates([path])


def test_unknown_json_shape_names_the_file_and_every_known_format(tmp_path):
    path = tmp_path / "scores.json"
    path.write_text(json.dumps({"accuracy": 0.9, "n": 10}))
    with pytest.raises(UserError) as error:
        load_candidates([path])
    message = str(error.value)
    assert "scores.json" in message and "accuracy" in message
    for name in FORMATS:
        assert name in message


def test_unknown_suffix_and_binary_files_are_refused(tmp_path):
    csv = tmp_path / "table.csv"
    csv.write_text("a,b\n1,2\n")
    with pytest.raises(UserError, match=r"cannot tell the format of '.*table\.csv'"):
        load_candidates([csv])
    blob = tmp_path / "blob"
    blob.write_bytes(b"\xff\xfe\x00\x01" * 10)
    with pytest.raises(UserError, match="not UTF-8"):
        load_candidates([blob])


def test_invalid_jsonl_line_is_named_by_number(tmp_path):
    good = json.dumps({"instance_id": "a", "model_patch": "p"})
    path = tmp_path / "preds.jsonl.gz"
    path.write_bytes(gzip.compress(f"{good}\n{good}\n\n{{not json\n".encode()))
    with pytest.raises(UserError, match=r"preds\.jsonl\.gz' line 4 is not valid JSON"):
        load_candidates([path])


def test_invalid_json_file_reports_the_position(tmp_path):
    path = tmp_path / "run.json"
    path.write_text('{"messages": [\n  {"role": "user", "content": "hi"},\n')
    with pytest.raises(UserError, match=r"run\.json' is not valid JSON .*line 3"):
        load_candidates([path])


def test_record_of_another_format_inside_a_jsonl_is_named(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps({"instance_id": "a", "model_patch": "p"}) + "\n"
                    + json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(UserError, match=r"line 2 is not a swebench-predictions record like line 1"):
        load_candidates([path])


def test_mixed_formats_in_one_call_name_the_odd_file():
    with pytest.raises(UserError, match=r"'.*fix_constant\.patch' is diff but '.*answer_a\.md' is text"):
        load_candidates([FIXTURES / "answer_a.md", FIXTURES / "fix_constant.patch"])


def test_mixed_formats_in_a_folder_of_files_name_the_odd_file(tmp_path):
    (tmp_path / "a.md").write_text("answer")
    (tmp_path / "b.patch").write_text((FIXTURES / "fix_constant.patch").read_text())
    with pytest.raises(UserError, match=r"b\.patch' is diff"):
        load_candidates([tmp_path])


def test_missing_path_empty_folder_and_empty_rollout(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_candidates([tmp_path / "nope.jsonl"])
    with pytest.raises(UserError, match="holds no candidate files"):
        load_candidates([tmp_path])
    (tmp_path / "run-1").mkdir()
    with pytest.raises(UserError, match=r"rollout folder '.*run-1' is empty"):
        load_candidates([tmp_path])


def test_empty_pool_and_no_paths_are_refused(tmp_path):
    with pytest.raises(UserError, match="no candidate files given"):
        load_pool([])
    with pytest.raises(UserError, match="no candidates to choose from"):
        require_single_task([])
    log = json.loads((FIXTURES / "inspect_log.json").read_text())
    log["samples"] = []
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    with pytest.raises(UserError, match="holds no samples"):
        load_pool([path])


def test_single_candidate_is_a_valid_selection():
    task, candidates = load_selection([FIXTURES / "answer_a.md"], task=Task("Count the lines."))
    assert task.text == "Count the lines."
    assert len(candidates) == 1


def test_candidates_of_different_tasks_cannot_be_selected_together():
    with pytest.raises(UserError, match=r"2 different tasks \('pkg__pkg-101', 'pkg__pkg-202'\)"):
        load_selection([FIXTURES / "swebench_predictions.jsonl"])


def test_candidates_without_task_join_the_one_task_given():
    a = Candidate(id="a", task=Task("Sort it", id="t1"))
    b = Candidate(id="b")
    group = require_single_task([a, b])
    assert group.task.id == "t1" and [c.id for c in group.candidates] == ["a", "b"]


def test_duplicate_ids_within_a_task_are_made_unique():
    cands = [Candidate(id="run", source="x.jsonl:1"), Candidate(id="run", source="x.jsonl:2")]
    _, out = require_single_task(cands, Task("t"))
    assert [c.id for c in out] == ["run@x.jsonl:1", "run@x.jsonl:2"]


def test_unknown_format_name_is_refused():
    with pytest.raises(UserError, match="unknown format 'csv': choose one of"):
        load_file(FIXTURES / "answer_a.md", format="csv")


def test_bad_trajectory_string_names_the_line(tmp_path):
    path = tmp_path / "trials.jsonl"
    path.write_text(json.dumps({"trial_name": "t", "trajectory": '{"steps": [oops'}) + "\n")
    with pytest.raises(UserError, match=r"trials\.jsonl:1: its 'trajectory' string is not valid JSON"):
        load_candidates([path])
