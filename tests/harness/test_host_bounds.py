"""Host work stays bounded on hostile session output (issue 30: ledgers, grep, hand-back).

No test here asserts seconds: each counts the work done (schema errors consumed, bytes read at
once, blocks allocated) or checks an event (the grep child was killed), with at most a generous
hang guard.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veriscale.harness.claims import claim_map
from veriscale.harness.protocol import session_records as records
from veriscale.harness.protocol.session_records import MAX_SCHEMA_PROBLEMS, RECORD_KINDS, read_record


class _CountingValidator:
    """Wraps a jsonschema validator and counts the errors its ``iter_errors`` yields."""

    def __init__(self, inner) -> None:
        self.inner, self.consumed = inner, 0

    def iter_errors(self, doc):
        for error in self.inner.iter_errors(doc):
            self.consumed += 1
            yield error


@pytest.fixture
def counting(monkeypatch):
    made: dict[str, _CountingValidator] = {}
    real = records._validator

    def validator(kind: str) -> _CountingValidator:
        made[kind] = _CountingValidator(real(kind))
        return made[kind]

    monkeypatch.setattr(records, "_validator", validator)
    return made


def _empty_entries_ledger(path: Path, size: int = 4_190_000) -> Path:
    count = (size - len('{"entries":[]}')) // 3
    path.write_text('{"entries":[' + ",".join(["{}"] * count) + "]}")
    return path


@pytest.mark.parametrize("kind", ["resolver", "challenger"])
def test_a_4mb_ledger_of_empty_entries_is_refused_after_one_error(tmp_path: Path, counting, kind: str) -> None:
    path = _empty_entries_ledger(tmp_path / "ledger.json")
    assert path.stat().st_size > 4_100_000
    doc, problems = read_record(path, kind)
    assert doc is not None and len(doc["entries"]) > 1_000_000
    # before: every one of the 1.4 M entries was checked, 5.2 M errors collected (184 s, 18 GB)
    assert counting[kind].consumed == 1
    assert len(problems) == 1
    assert f"holds {len(doc['entries'])} items, more than the 1000 allowed" in problems[0]
    assert len(problems[0]) < 200


@pytest.mark.parametrize("kind", RECORD_KINDS)
def test_many_bad_entries_under_the_size_cap_stop_after_a_few_errors(counting, kind: str) -> None:
    key = {"resolver": "entries", "challenger": "entries", "finish": "revisions", "repair": "changes"}[kind]
    doc = {"base": "r01", "revisions": [], "unresolved": [], "changes": [], "entries": []}
    doc[key] = [{}] * 400                     # under every maxItems: each entry is looked at
    problems = records.check_record(kind, doc, records.RecordContext(rollouts=["r01"]))
    assert counting[kind].consumed == MAX_SCHEMA_PROBLEMS
    assert len(problems) == MAX_SCHEMA_PROBLEMS + 1 and "stopped after its first 5" in problems[-1]


def test_a_huge_string_is_refused_by_its_length_without_quoting_it(counting) -> None:
    doc = {"entries": [], "notes": "x" * 3_000_000}
    problems = records.check_record("challenger", doc)
    assert counting["challenger"].consumed == 1
    assert problems == ["challenger record at notes: is 3000000 characters long, more than the 20000 allowed: "
                        "shorten it"]


def test_honest_records_still_pass() -> None:
    resolver = {"entries": [{"id": "R1", "claim": "a.xlsx:S!B2", "question": "q", "checks": ["read"],
                             "findings": "f", "verdict": "cannot tell"}]}
    assert records.check_record("resolver", resolver) == []
    finish = {"base": "r01", "revisions": [{"file": "a.xlsx", "change": "c", "evidence": ["resolver:R1"]}],
              "unresolved": []}
    assert records.check_record("finish", finish, records.RecordContext(rollouts=["r01"],
                                                                         evidence_ids={"resolver:R1"})) == []


def test_the_claim_map_check_raises_the_first_error_lazily(monkeypatch) -> None:
    import jsonschema

    consumed = []
    real = jsonschema.Draft202012Validator.iter_errors

    def counted(self, instance, *args, **kwargs):
        for error in real(self, instance, *args, **kwargs):
            consumed.append(error)
            yield error

    monkeypatch.setattr(jsonschema.Draft202012Validator, "iter_errors", counted)
    doc = {"schema_version": 1, "task": "t", "rollouts": ["r01", "r02"], "rel_tol": 0,
           "counts": {"consensus": 0, "disputed": 0, "omitted": 0}, "warnings": [], "claims": [{}] * 200_000}
    with pytest.raises(jsonschema.ValidationError):
        claim_map.validate(doc, "claims")
    assert len(consumed) == 1                 # before: jsonschema.validate collected all 1.6 M


# --- grep: the deadline reaches inside one file ------------------------------------------------



def test_a_slow_re2_search_over_one_long_line_is_killed_at_the_deadline(tmp_path: Path) -> None:
    import time

    from veriscale.harness.sessions.tools import ToolBox

    box = ToolBox(task_dir=tmp_path / "task", output_dir=tmp_path / "out", no_jail=True)
    (box.output_dir / "long.txt").write_text("a" * 2_000_000 + "\n")   # one 2 MB line: RE2 slow path
    (box.output_dir / "a.txt").write_text("needle\n")
    box.deadline = time.monotonic() + 3
    reply = box.call("grep", {"pattern": r"((a|b)*a(a|b){100}){10}c", "path": str(box.output_dir)})
    # the deadline, not the end of the search (about a minute of RE2's slow path), ended the call: the
    # reply carries the stop note and the grep child was killed (SIGKILL), not left to finish
    assert not reply.is_error and reply.text.endswith("[stopped: the session's time is up]"), reply.text
    assert box.last_grep is not None and box.last_grep.killed and box.last_grep.returncode == -9


def test_grep_in_its_child_still_finds_hits_and_refuses_bad_patterns(tmp_path: Path) -> None:
    from veriscale.harness.sessions.tools import ToolBox

    box = ToolBox(task_dir=tmp_path / "task", output_dir=tmp_path / "out", no_jail=True)
    (box.output_dir / "a.txt").write_text("hay\nneedle 1\nhay\n")
    (box.output_dir / "many.txt").write_text("x\n" * 500)
    reply = box.call("grep", {"pattern": "needle", "path": str(box.output_dir)})
    assert reply.text == f"{box.output_dir / 'a.txt'}:2:needle 1"
    assert not box.last_grep.killed and box.last_grep.returncode == 0
    many = box.call("grep", {"pattern": "^x$", "path": str(box.output_dir / "many.txt")})
    assert many.text.endswith("[stopped at 100 matches]") and many.text.count("\n") == 100
    bad = box.call("grep", {"pattern": r"(a)\1", "path": str(box.output_dir)})
    assert bad.is_error and "backreference" in bad.text


# --- hand-back: streamed, holes kept -------------------------------------------------------------

SPARSE_BYTES = 500 << 20


class _CountingSource:
    """Wraps a readable file object and records the largest read asked for and returned."""

    def __init__(self, inner) -> None:
        self.inner, self.asked, self.got = inner, 0, 0

    def read(self, n: int = -1) -> bytes:
        self.asked = max(self.asked, n if n >= 0 else 1 << 62)
        data = self.inner.read(n)
        self.got = max(self.got, len(data))
        return data


@pytest.fixture
def counting_sources(monkeypatch):
    from veriscale.harness import safe_write
    from veriscale.harness.jail import harvest

    sources: list[_CountingSource] = []
    real = safe_write.write_stream_beneath

    def counted(root, rel, source, *args, **kwargs):
        sources.append(_CountingSource(source))
        return real(root, rel, sources[-1], *args, **kwargs)

    monkeypatch.setattr(harvest, "write_stream_beneath", counted)
    monkeypatch.setattr(safe_write, "write_stream_beneath", counted)
    return sources


def _sparse_tree(folder: Path) -> Path:
    folder.mkdir()
    with open(folder / "sparse.bin", "wb") as handle:   # truncate(1): 500 MiB, no block allocated
        handle.truncate(SPARSE_BYTES)
    with open(folder / "island.bin", "wb") as handle:   # data in the middle of a hole
        handle.seek(200 << 20)
        handle.write(b"data" * 1024)
        handle.truncate(300 << 20)
    (folder / "small.txt").write_text("hello\n")
    return folder


def test_a_sparse_500mib_hand_back_is_streamed_and_stays_sparse(tmp_path: Path, counting_sources) -> None:
    import os
    import tarfile
    import threading

    from veriscale.harness.jail.harvest import HarvestReader
    from veriscale.harness.safe_write import STREAM_CHUNK_BYTES

    out = _sparse_tree(tmp_path / "inside")
    read_fd, write_fd = os.pipe()
    reader = HarvestReader(read_fd, cap_bytes=1 << 30, max_entries=100, max_depth=8)

    def launcher() -> None:   # what jail_inside.harvest sends: a plain tar of the output folder
        with os.fdopen(write_fd, "wb") as pipe, tarfile.open(fileobj=pipe, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for name in ("sparse.bin", "island.bin", "small.txt"):
                tar.add(out / name, arcname=name)

    sender = threading.Thread(target=launcher)
    sender.start()
    sender.join(120)
    dest = tmp_path / "host" / "out"
    dest.parent.mkdir()
    report = reader.apply(dest)
    assert report.ok, report.error
    sparse, island = (dest / "sparse.bin").stat(), (dest / "island.bin").stat()
    assert sparse.st_size == SPARSE_BYTES and island.st_size == 300 << 20
    # before: 500 MiB allocated on the host disk (and held whole in memory, 559 MB RSS)
    assert sparse.st_blocks * 512 <= 1 << 20
    assert island.st_blocks * 512 <= 2 * STREAM_CHUNK_BYTES
    with open(dest / "island.bin", "rb") as handle:
        handle.seek(200 << 20)
        assert handle.read(4096) == b"data" * 1024
    assert (dest / "small.txt").read_text() == "hello\n"
    assert len(counting_sources) == 3
    assert max(s.asked for s in counting_sources) <= STREAM_CHUNK_BYTES
    assert max(s.got for s in counting_sources) == STREAM_CHUNK_BYTES


def test_copy_plain_tree_streams_and_keeps_holes(tmp_path: Path, counting_sources) -> None:
    from veriscale.harness.safe_write import STREAM_CHUNK_BYTES, copy_plain_tree

    src = _sparse_tree(tmp_path / "src")
    assert copy_plain_tree(src, tmp_path / "dest", max_bytes=1 << 30) == []
    copy = (tmp_path / "dest" / "sparse.bin").stat()
    assert copy.st_size == SPARSE_BYTES and copy.st_blocks * 512 <= 1 << 20
    assert max(s.asked for s in counting_sources) <= STREAM_CHUNK_BYTES
    over = copy_plain_tree(src, tmp_path / "capped", max_bytes=1 << 20)   # the size cap still holds
    assert any(line.startswith("sparse.bin (") and "limit" in line for line in over), over
