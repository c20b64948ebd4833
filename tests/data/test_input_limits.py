"""The inputs the fuzz suites found crashing the importers, the criteria and skill parsers and the
bench pairs reader: each is now refused in one sentence (or read), never a traceback or a hang."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import pytest

from tests.fuzz.guard import bounded
from veriscale.bench.datasets import load_pairs
from veriscale.data.importers import load_file
from veriscale.errors import UserError
from veriscale.harness.skills.library import read_skill
from veriscale.verify.criteria import load_criteria, parse_criteria

MESSAGES = '[{"role": "user", "content": "Sort it."}, {"role": "assistant", "content": %s}]'


def _refusal(path: Path, *words: str) -> str:
    with bounded(f"load_file({path.name})"), pytest.raises(UserError) as caught:
        load_file(path)
    message = str(caught.value)
    assert "\n" not in message and all(w in message for w in words), message
    return message


@pytest.mark.parametrize("value, words", [
    ("1" + "0" * 5000, ["5,001 characters long (at most 1,000)"]),
    ("[" * 100_000 + "]" * 100_000, ["more than 100 deep"]),
    ('"\\ud800 alone"', ["lone surrogate"]),
], ids=["5000-digit-number", "100000-deep", "lone-surrogate"])
def test_json_past_the_caps_is_refused_in_one_sentence(tmp_path, value, words):
    path = tmp_path / "chat.json"
    path.write_text(MESSAGES % value)
    _refusal(path, "chat.json", *words)
    lines = tmp_path / "chat.jsonl"
    lines.write_text('{"role": "user", "content": "Sort it."}\n{"role": "assistant", "content": %s}\n' % value)
    _refusal(lines, "line 2", *words)


def test_a_valid_surrogate_pair_is_text(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(MESSAGES % '"done \\ud83d\\ude00"')
    _, (cand,) = load_file(path)
    assert cand.text == "done \U0001f600"


def test_inspect_samples_that_are_not_objects_are_refused(tmp_path):
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"eval": {"task": "ctf", "model": "m"}, "samples": [1, "two"]}))
    _refusal(path, "sample 1 is a int, not an object")


def test_an_eval_archive_with_a_member_that_is_not_utf8_is_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("header.json", b'{"eval": {"task": "t"}}')
        archive.writestr("samples/1_epoch_1.json", b'{"id": "\xff"}')
    path = tmp_path / "log.eval"
    path.write_bytes(buffer.getvalue())
    _refusal(path, "samples/1_epoch_1.json", "not UTF-8")


def test_an_exit_code_past_32_bits_is_no_exit_code(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps([
        {"role": "user", "content": "Fix it."},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "exit code: " + "9" * 5000, "exit_code": 10 ** 30}]))
    _, (cand,) = load_file(path)
    assert cand.trajectory.steps[0].exit_code is None


def test_tool_calls_and_results_of_the_wrong_type_are_skipped(tmp_path):
    path = tmp_path / "trial.json"
    path.write_text(json.dumps({"trial_name": "t1", "trajectory": {"schema_version": "ATIF-v1.2", "steps": [
        {"source": "user", "message": "Do it."},
        {"source": "agent", "message": "ok", "tool_calls": 7, "observation": {"results": 5}}]}}))
    _, (cand,) = load_file(path)
    assert cand.trajectory.steps[0].tool_calls == [] and cand.text == "ok"


def test_a_fifo_or_a_device_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    _refusal(fifo, "not a regular file")
    device = tmp_path / "answer.md"
    device.symlink_to("/dev/zero")
    _refusal(device, "not a regular file")


def test_record_keys_with_newlines_stay_on_one_line(tmp_path):
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"first\nsecond": 1, "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"): 2}))
    assert "first\\nsecond" in _refusal(path, "cannot tell the format")


def test_a_gzip_file_with_a_damaged_stream_is_refused(tmp_path):
    import gzip

    data = bytearray(gzip.compress(b'{"role": "user", "content": "x"}\n' * 50))
    data[20:30] = b"\x00" * 10
    path = tmp_path / "runs.jsonl.gz"
    path.write_bytes(bytes(data))
    _refusal(path, "not a valid gzip file")


def test_criteria_headings_need_a_name_and_appear_once():
    with pytest.raises(UserError, match="has no criteria"):
        parse_criteria("##   \nchecks something\n", "c.md")
    with pytest.raises(UserError, match="appears twice"):
        parse_criteria("## Errors\nno errors\n## errors\nnone at all\n", "c.md")


def test_a_criteria_or_skill_file_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "criteria.md"
    os.mkfifo(fifo)
    with bounded("load_criteria(fifo)"), pytest.raises(UserError, match="not a regular file"):
        load_criteria(str(fifo))
    folder = tmp_path / "evidence-x"
    folder.mkdir()
    os.mkfifo(folder / "SKILL.md")
    with bounded("read_skill(fifo)"), pytest.raises(UserError, match="not a regular file"):
        read_skill(folder / "SKILL.md")


def test_bench_pairs_lines_that_are_not_objects_or_past_the_caps_are_refused(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text("[1, 2]\n")
    with pytest.raises(UserError, match="line 1 .* not a JSON object"):
        load_pairs(path)
    path.write_text('{"instruction": "x", "output_1": %s, "output_2": "b", "label": 1}\n' % ("7" * 5000))
    with pytest.raises(UserError, match="5,000 characters long"):
        load_pairs(path)
    with pytest.raises(UserError, match="is a folder"):
        load_pairs(tmp_path)
