"""The one input reader: what it refuses, in one sentence each, and what it reads unchanged."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from veriscale.data import reader
from veriscale.data.reader import BadInput


def test_a_socket_is_refused_by_name(tmp_path):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(BadInput, match=r"candidate 's\.sock'|is a socket, not a regular file"):
            reader.read_text(path, "candidate")


def test_a_missing_file_and_a_folder_are_refused(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        reader.read_bytes(tmp_path / "nope.md", "task")
    with pytest.raises(BadInput, match="is a folder, not a regular file: pass a file inside it"):
        reader.read_bytes(tmp_path, "task")
    from veriscale.data.text_input import read_text_input

    with pytest.raises(BadInput, match="candidate '.*' is a folder, not a regular file: pass a file inside it$"):
        read_text_input(str(tmp_path), "candidate")


def test_the_size_limit_is_a_setting_and_a_bad_value_is_named(tmp_path, monkeypatch):
    path = tmp_path / "a.md"
    path.write_bytes(b"x" * 3000)
    assert reader.read_text(path, "candidate") == "x" * 3000
    monkeypatch.setenv(reader.MAX_INPUT_ENV, "0.001")  # about a kilobyte
    with pytest.raises(BadInput, match=r"a\.md' is 3,000 bytes, above the 0\.001 MiB input limit.*raise max_input_mb / \$VERISCALE_MAX_INPUT_MB \(now 0\.001\)"):
        reader.read_text(path, "candidate")
    monkeypatch.setenv(reader.MAX_INPUT_ENV, "lots")
    with pytest.raises(reader.UserError, match="VERISCALE_MAX_INPUT_MB='lots' is not a size in MiB"):
        reader.read_text(path, "candidate")


def test_utf8_with_a_byte_order_mark_reads_and_other_bytes_are_named(tmp_path):
    path = tmp_path / "a.md"
    path.write_bytes("\ufeffcafé".encode())
    assert reader.read_text(path, "candidate") == "café"
    path.write_bytes(b"caf\xe9")
    with pytest.raises(BadInput, match=r"candidate '.*a\.md' is not UTF-8 text \(an invalid byte at position 3\)"):
        reader.read_text(path, "candidate")


def test_json_limits_and_what_stays_a_syntax_error():
    assert reader.parse_json('{"a": "[[[[", "b": [1, 2.5, "\\ud83d\\ude00"]}', "x") == {"a": "[[[[", "b": [1, 2.5, "😀"]}
    assert reader.parse_json("[" * 100 + "]" * 100, "x") is not None
    assert reader.parse_json('"' + "\\\\" * 3 + '[[[["', "x") == "\\\\\\[[[["
    for text, reason in (("[" * 101 + "]" * 101, "nested more than 100 deep"),
                         ("[" * 100_000, "nested more than 100 deep"),
                         ("1" * 1001, "a number too long"),
                         ("-" + "1" * 1001, "a number too long"),
                         ("1." + "5" * 1000, "a number too long"),
                         ('["ok", {"k\\udc00": 1}]', "a lone surrogate escape"),
                         ('"\\ud800"', "a lone surrogate escape")):
        with pytest.raises(BadInput) as error:
            reader.parse_json(text, "candidate file 'c.json'")
        assert error.value.reason == reason and str(error.value).startswith("candidate file 'c.json'")
    with pytest.raises(json.JSONDecodeError):
        reader.parse_json("{not json", "x")


def test_gzip_is_inflated_under_the_limit(tmp_path, monkeypatch):
    import gzip

    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"a": 1}\n') + gzip.compress(b'{"b": 2}\n'))
    assert reader.read_text(path, "candidate file", gunzip=True) == '{"a": 1}\n{"b": 2}\n'
    path.write_bytes(gzip.compress(b"x" * 5000)[:-12])
    with pytest.raises(BadInput, match="truncated gzip"):
        reader.read_bytes(path, "candidate file", gunzip=True)


def test_a_regular_file_opens_as_a_blocking_handle(tmp_path):
    path = tmp_path / "steps.jsonl"
    path.write_text("one\n")
    with reader.open_regular(path, "steps file") as handle:
        assert handle.read() == b"one\n"
        import os

        assert os.get_blocking(handle.fileno())


def test_a_calibration_pairs_file_is_read_by_the_reader(tmp_path):
    from veriscale.verify.calibration import load_labelled_pairs

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_bytes(b'{"instruction": "caf\xe9", "output_1": "a", "output_2": "b", "label": 1}\n')
    with pytest.raises(BadInput, match=r"pairs file '.*pairs\.jsonl' is not UTF-8 text"):
        load_labelled_pairs(str(pairs))
    pairs.write_text("[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(BadInput, match=r"line 1 of pairs file '.*' nests arrays or objects more than 100 deep"):
        load_labelled_pairs(str(pairs))


def test_a_lone_surrogate_from_a_python_caller_is_refused_before_the_store(tmp_path):
    """(The scripted scorer is a test double: nothing here is about its verdicts.)"""
    from tests.support.scripted_model import ScriptedScoreModel
    from veriscale import compare, score
    from veriscale.data.model import Candidate
    from veriscale.engine.store import Store
    from veriscale.selection.select import select
    from veriscale.verify.reward import Verifier

    store = tmp_path / "s.sqlite3"
    with pytest.raises(BadInput, match=r"the candidate holds a lone UTF-16 surrogate \(U\+D800 at character 5\)"):
        score("Sum a list.", "done \ud800", model=ScriptedScoreModel(), store=store)
    with pytest.raises(BadInput, match="the task holds a lone UTF-16 surrogate"):
        compare("Sum \udfff", "a", "b", model=ScriptedScoreModel(), store=store)
    with pytest.raises(BadInput, match="candidate r2 holds a lone UTF-16 surrogate"):
        select("Sum a list.", [Candidate(id="r1", text="sum(xs)"), Candidate(id="r2", text="x \udc80")],
               verifier=Verifier(ScriptedScoreModel(), store=Store.open(store), criteria="general"))


def test_the_store_key_refuses_a_lone_surrogate_in_one_sentence():
    from veriscale.engine.store import call_key
    from veriscale.errors import UserError

    assert len(call_key("fp", "v3", {"messages": [{"role": "user", "content": "😀"}]})) == 64
    with pytest.raises(UserError, match=r"a prompt holds a lone UTF-16 surrogate \(U\+DFFF\)"):
        call_key("fp", "v3", {"messages": [{"role": "user", "content": "step \udfff"}]})
