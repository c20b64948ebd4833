"""Every command reads its inputs through one reader: a FIFO, a device, an oversized file, bad
UTF-8 (files and stdin), JSON nested too deep, a number too long or a lone surrogate each end in
one sentence naming the input, exit 2, never a traceback and never a hang.

Each command runs in a subprocess with a generous hang guard (a FIFO with no writer blocks an
``open()`` forever; ``/dev/zero`` never ends). Where a model is needed it is the fault server (a
real HTTP endpoint with fixed probabilities) and the command is a ``--dry-run``: nothing is sent.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from tests.inputs.cli import one_sentence, run_cli
from tests.support.fault_server import FaultServer

PAIR = Path(__file__).resolve().parents[2] / "examples" / "pair"


@pytest.fixture(scope="module")
def server():
    with FaultServer() as srv:
        yield srv


@pytest.fixture()
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "answer.md"
    os.mkfifo(path)
    return path


def _model(server: FaultServer, tmp_path: Path) -> list[str]:
    return ["--model", server.url + "#fault-model", "--store", str(tmp_path / "s.sqlite3")]


def test_a_fifo_as_task_or_candidate_is_refused_without_blocking(fifo, tmp_path):
    task = str(PAIR / "task.md")
    one_sentence(run_cli("score", str(fifo), str(PAIR / "a.md"), "--dry-run"), "task", "answer.md", "FIFO",
                 "regular file")
    one_sentence(run_cli("score", task, str(fifo), "--dry-run"), "candidate", "FIFO")
    one_sentence(run_cli("compare", task, str(PAIR / "a.md"), str(fifo), "--dry-run"), "candidate B", "FIFO")
    one_sentence(run_cli("select", "--task", task, str(PAIR / "a.md"), str(fifo), "--dry-run"), "answer.md", "FIFO")
    one_sentence(run_cli("select", "--task", str(fifo), str(PAIR / "a.md"), str(PAIR / "b.md"), "--dry-run"),
                 "task", "FIFO")
    one_sentence(run_cli("track", str(fifo)), "answer.md", "FIFO")
    one_sentence(run_cli("track", "--follow", str(fifo), "--idle-timeout", "5"), "steps file", "FIFO")
    criteria = tmp_path / "criteria.md"
    os.mkfifo(criteria)
    one_sentence(run_cli("score", task, str(PAIR / "a.md"), "--criteria", str(criteria), "--dry-run"),
                 "criteria file", "FIFO")


def test_a_device_as_candidate_is_refused(tmp_path):
    one_sentence(run_cli("score", str(PAIR / "task.md"), "/dev/zero", "--dry-run"), "/dev/zero", "character device")
    one_sentence(run_cli("select", "--task", str(PAIR / "task.md"), str(PAIR / "a.md"), "/dev/zero", "--dry-run"),
                 "/dev/zero", "character device")


def test_an_input_over_the_size_limit_names_the_setting(tmp_path):
    big = tmp_path / "big.md"
    big.write_bytes(b"x" * (2 << 20))
    small = {"VERISCALE_MAX_INPUT_MB": "1"}
    one_sentence(run_cli("score", str(PAIR / "task.md"), str(big), "--dry-run", env=small),
                 "big.md", "1 MiB input limit", "VERISCALE_MAX_INPUT_MB")
    one_sentence(run_cli("select", "--task", str(PAIR / "task.md"), str(PAIR / "a.md"), str(big), "--dry-run",
                         env=small), "big.md", "VERISCALE_MAX_INPUT_MB")
    one_sentence(run_cli("score", str(PAIR / "task.md"), "-", "--dry-run", env=small, stdin=b"y" * (2 << 20)),
                 "stdin", "VERISCALE_MAX_INPUT_MB")


def test_a_gzip_file_is_capped_after_it_is_inflated(tmp_path):
    import gzip

    bomb = tmp_path / "runs.jsonl.gz"
    bomb.write_bytes(gzip.compress(b" " * (3 << 20)))  # 3 MiB of blanks in a few kilobytes
    one_sentence(run_cli("select", "--task", str(PAIR / "task.md"), str(bomb), "--dry-run",
                         env={"VERISCALE_MAX_INPUT_MB": "1"}), "runs.jsonl.gz", "uncompressed", "input limit")


def test_bytes_that_are_not_utf8_on_stdin_or_in_a_file_are_bad_input(tmp_path):
    one_sentence(run_cli("score", str(PAIR / "task.md"), "-", "--dry-run", stdin=b"caf\xe9 \xff\xfe"),
                 "candidate from stdin", "not UTF-8")
    one_sentence(run_cli("score", "-", str(PAIR / "a.md"), "--dry-run", stdin=b"\x80abc"), "task from stdin",
                 "not UTF-8")
    latin = tmp_path / "latin.md"
    latin.write_bytes(b"r\xe9ponse")
    one_sentence(run_cli("score", str(PAIR / "task.md"), str(latin), "--dry-run"), "latin.md", "not UTF-8")


def _json_file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_json_nested_too_deep_is_bad_input_everywhere(server, tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    cand = _json_file(tmp_path, "deep.json", deep)
    one_sentence(run_cli("score", str(PAIR / "task.md"), str(cand), "--dry-run", *_model(server, tmp_path)),
                 "deep.json", "100")
    one_sentence(run_cli("select", "--task", str(PAIR / "task.md"), str(PAIR / "a.md"), str(cand), "--dry-run"),
                 "deep.json", "100")
    lines = _json_file(tmp_path, "runs.jsonl", json.dumps({"problem": "p", "steps": ["a"]}) + "\n" + deep + "\n")
    one_sentence(run_cli("track", str(lines)), "runs.jsonl' line 2", "100")
    obj = '{"messages": ' + "[" * 50_000 + "]" * 50_000 + "}"
    one_sentence(run_cli("score", "-", str(PAIR / "a.md"), "--dry-run", stdin=obj.encode()), "task from stdin",
                 "deep")


def test_a_5000_digit_number_is_bad_input(server, tmp_path):
    cand = _json_file(tmp_path, "num.json", '{"text": "answer", "n": ' + "9" * 5000 + "}")
    one_sentence(run_cli("score", str(PAIR / "task.md"), str(cand), "--dry-run", *_model(server, tmp_path)),
                 "num.json", "5,000 characters long")
    pool = _json_file(tmp_path, "pool.jsonl", json.dumps({"id": "r1", "messages": []})[:-1] + ', "x": '
                      + "1" * 5000 + "}\n")
    one_sentence(run_cli("select", "--task", str(PAIR / "task.md"), str(pool), "--dry-run"), "pool.jsonl", "number")


def test_a_lone_surrogate_never_reaches_the_store_key(server, tmp_path):
    cand = _json_file(tmp_path, "s.json", '{"text": "done \\ud800 here"}')
    one_sentence(run_cli("score", str(PAIR / "task.md"), str(cand), "--dry-run", *_model(server, tmp_path)),
                 "s.json", "surrogate")
    ok = _json_file(tmp_path, "pair.json", '{"text": "an emoji \\ud83d\\ude00 is a valid pair"}')
    fine = run_cli("score", str(PAIR / "task.md"), str(ok), "--dry-run", "--json", *_model(server, tmp_path))
    assert fine.returncode == 0, fine.stderr
    pool = _json_file(tmp_path, "pool.jsonl", json.dumps({"id": "r1", "messages": [
        {"role": "user", "content": "t"}, {"role": "assistant", "content": "x"}]}).replace('"x"', '"\\udfff"') + "\n")
    one_sentence(run_cli("select", str(pool), str(PAIR / "a.md"), "--dry-run", *_model(server, tmp_path)),
                 "pool.jsonl", "surrogate")


def test_inspect_samples_that_are_not_objects_are_bad_input(tmp_path):
    log = _json_file(tmp_path, "log.json", json.dumps({"eval": {"task": "ctf", "model": "m"},
                                                       "samples": [{"id": 1, "messages": []}, 7, "x"]}))
    one_sentence(run_cli("select", "--task", str(PAIR / "task.md"), str(log), "--dry-run"), "log.json", "sample 2",
                 "not an object")
    archive = tmp_path / "run.eval"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("header.json", json.dumps({"eval": {"task": "ctf", "model": "m"}}))
        zf.writestr("samples/1.json", json.dumps([1, 2, 3]))
    one_sentence(run_cli("select", "--task", str(PAIR / "task.md"), str(archive), "--dry-run"), "run.eval",
                 "sample 1 is a list")


def test_a_followed_line_over_the_size_limit_is_refused(server, tmp_path):
    steps = tmp_path / "steps.jsonl"
    steps.write_bytes(json.dumps({"task": "t"}).encode() + b"\n" + b"x" * (2 << 20))  # a line that never ends
    one_sentence(run_cli("track", "--follow", str(steps), "--idle-timeout", "30", *_model(server, tmp_path),
                         env={"VERISCALE_MAX_INPUT_MB": "1"}), "line 2", "1 MiB input limit", "VERISCALE_MAX_INPUT_MB")
