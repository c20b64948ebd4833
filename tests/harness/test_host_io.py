"""What the host itself does with what a session hands it (issue 19, findings 1, 3, 5, 6, 7, 8).

No jail here: each test plants what a hostile session could leave (a catastrophic regex, a cut
tar stream, a tree 2,500 folders deep, a 255-byte name, a JSON bomb, a link on the way) and runs
the host's own code on it. The jailed halves are in ``test_jail_host_io.py``.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from veriscale.harness.jail.harvest import HarvestReader
from veriscale.harness.protocol.gate import keep_base_files
from veriscale.harness.protocol.session_records import read_record
from veriscale.harness.safe_fs import walk_entries
from veriscale.harness.safe_write import copy_plain_tree, remove_tree, write_beneath
from veriscale.harness.sessions import executors
from veriscale.harness.sessions.tools import ToolBox
from veriscale.harness.workspace.safe_copy import copy_tree

DEEP = 2_500
#: A generous hang guard (the fixed grep answers in milliseconds; the old one never did).
GREP_GUARD_S = 120


def _box(tmp_path: Path, **kwargs) -> ToolBox:
    task = tmp_path / "task"
    (task / "spec").mkdir(parents=True, exist_ok=True)
    (task / "spec" / "task.md").write_text("find the answer\n")
    return ToolBox(task_dir=task, output_dir=task / "sessions" / "s1", no_jail=True, **kwargs)


def _deep_tree(top: Path, depth: int = DEEP, leaf: str = "bottom.txt") -> None:
    """``top/a/a/.../a/leaf``, ``depth`` folders deep (made by walking down: the path outgrows PATH_MAX)."""
    top.mkdir(parents=True, exist_ok=True)
    here = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("a", dir_fd=here)
            child = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=here)
            os.close(here)
            here = child
        fd = os.open(leaf, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=here)
        os.write(fd, b"the deepest answer\n")
        os.close(fd)
    finally:
        os.close(here)


# --- 1. host tools run in linear time and end at the deadline -----------------------------------


def test_a_catastrophic_grep_pattern_does_not_freeze_the_host(tmp_path: Path) -> None:
    box = _box(tmp_path)
    (box.output_dir / "line.txt").write_text("a" * 40 + "b\n")
    script = (
        "import sys, json; from pathlib import Path; from veriscale.harness.sessions.tools import ToolBox\n"
        "box = ToolBox(task_dir=Path(sys.argv[1]), output_dir=Path(sys.argv[2]), no_jail=True)\n"
        "r = box.call('grep', {'pattern': '^(a+)+$', 'path': sys.argv[2]})\n"
        "print(json.dumps([r.text, r.is_error]))\n"
    )
    # a subprocess: a backtracking engine holds the GIL, so an in-process guard could not fire
    done = subprocess.run([sys.executable, "-c", script, str(box.task_dir), str(box.output_dir)],
                          capture_output=True, text=True, timeout=GREP_GUARD_S, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    text, is_error = json.loads(done.stdout)
    assert (text, is_error) == ("[no matches]", False)
    assert done.stderr == ""  # RE2 logs nothing on the host's stderr


def test_patterns_re2_cannot_run_get_one_sentence_back(tmp_path: Path) -> None:
    box = _box(tmp_path)
    (box.output_dir / "x.txt").write_text("abab\n")
    for pattern in (r"(ab)\1", r"(?<=a)b", r"a(?!c)"):
        reply = box.call("grep", {"pattern": pattern, "path": str(box.output_dir)})
        assert reply.is_error and "backreference, lookaround" in reply.text and "RE2" in reply.text, reply.text
        assert reply.text.count("\n") == 0
    ok = box.call("grep", {"pattern": r"(ab)+", "path": str(box.output_dir)})
    assert not ok.is_error and "x.txt:1:abab" in ok.text


def test_no_tool_call_outlives_the_session_deadline(tmp_path: Path) -> None:
    box = _box(tmp_path, deadline=time.monotonic() - 1)
    (box.output_dir / "x.txt").write_text("needle\n")
    for name, args in (("grep", {"pattern": "needle"}), ("find", {"pattern": "*.txt"}), ("ls", {}),
                       ("read", {"path": "spec/task.md"}), ("write", {"path": "y.txt", "content": "y"})):
        reply = box.call(name, args)
        assert reply.is_error and "time is up" in reply.text, (name, reply.text)
    assert not (box.output_dir / "y.txt").exists()
    # a run with less time left than the jail's hand-back grace is refused, not started past the deadline
    soon = _box(tmp_path, deadline=time.monotonic() + 3)
    reply = soon.call("run", {"command": "echo started > started.txt"})
    assert reply.is_error and "time is up" in reply.text, reply.text
    assert not (soon.output_dir / "started.txt").exists()


# --- 5. host walkers are iterative ------------------------------------------------------------


@pytest.fixture()
def deep_box(tmp_path: Path):
    """A toolbox whose output folder holds a tree 2,500 folders deep; every deep tree removed after."""
    box = _box(tmp_path)
    _deep_tree(box.output_dir / "deep")
    yield box
    for made in (tmp_path / "delivered", box.output_dir / "deep", tmp_path / "copied"):
        remove_tree(made)  # pytest's own cleanup (shutil.rmtree) recurses and would fail on them


def test_host_walkers_handle_a_tree_2500_folders_deep(deep_box: ToolBox, tmp_path: Path) -> None:
    box = deep_box
    entries = list(walk_entries(box.output_dir))
    assert len(entries) == DEEP + 2 and max(len(rel.parts) for rel, _ in entries) == DEEP + 2
    found = box.call("find", {"pattern": "bottom.txt", "path": str(box.output_dir)})
    assert not found.is_error and found.text.endswith("/a/bottom.txt"), found.text[-200:]
    grep = box.call("grep", {"pattern": "deepest", "path": str(box.output_dir)})
    assert not grep.is_error and grep.text.endswith(":1:the deepest answer"), grep.text[-200:]
    # the delivery gate restores a base file 2,500 folders down and hashes it
    delivered = tmp_path / "delivered"
    report = keep_base_files(box.output_dir, delivered)
    assert [f["status"] for f in report["files"]] == ["restored"]
    assert report["files"][0]["path"].endswith("/a/bottom.txt")
    assert len(list(walk_entries(delivered))) == DEEP + 2
    # materialize's copy refuses the path it cannot name in one sentence, never a RecursionError
    from veriscale.errors import UserError

    with pytest.raises(UserError, match="nests deeper than 256 folders"):
        copy_tree(box.output_dir, tmp_path / "copied", root=box.output_dir, skip=lambda rel, is_dir: None, left_out=[])
    remove_tree(delivered)
    assert not delivered.exists()


# --- 3, 5, 6. the hand-back: cut streams, deadline, long names ---------------------------------


def _tar(members: list[tuple[str, bytes | None]], *, end: bool = True) -> bytes:
    """A tar stream of (name, data; None = folder), with or without its end marker."""
    buffer = io.BytesIO()
    tar = tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT)
    for name, data in members:
        info = tarfile.TarInfo(name)
        if data is None:
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        else:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    if end:
        tar.close()
        return buffer.getvalue()
    tar.fileobj.flush()
    return buffer.getvalue()


def _hand_back(stream: bytes, dest: Path, **kwargs):
    read_fd, write_fd = os.pipe()
    reader = HarvestReader(read_fd, cap_bytes=64 << 20)
    with os.fdopen(write_fd, "wb") as pipe:
        pipe.write(stream)
    return reader.apply(dest, **kwargs)


@pytest.mark.parametrize("cut", ["at a member boundary", "inside a member"])
def test_a_cut_hand_back_stream_leaves_the_host_copy_as_it_was(tmp_path: Path, cut: str) -> None:
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "kept.txt").write_text("kept\n")
    whole = _tar([("sub", None), ("sub/a.txt", b"a" * 2000), ("b.txt", b"b")], end=False)
    stream = whole if cut == "at a member boundary" else whole[: len(whole) - 700]
    report = _hand_back(stream, dest)
    assert not report.ok and ("cut before its end" in report.error or "malformed" in report.error), report.error
    assert sorted(p.name for p in dest.iterdir()) == ["kept.txt"]
    clean = _hand_back(_tar([("sub", None), ("sub/a.txt", b"a"), ("b.txt", b"b")]), dest)
    assert clean.ok and sorted(p.name for p in dest.iterdir()) == ["b.txt", "sub"]


def test_a_hand_back_past_the_deadline_is_not_kept(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "kept.txt").write_text("kept\n")
    stream = _tar([(f"f{i}.txt", b"") for i in range(600)])
    report = _hand_back(stream, dest, deadline=time.monotonic() - 1)
    assert not report.ok and "deadline" in report.error
    assert sorted(p.name for p in dest.iterdir()) == ["kept.txt"]


def test_a_long_name_is_kept_and_a_name_the_host_cannot_take_is_dropped_alone(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    longest = "n" * 251 + ".txt"  # 255 bytes: legal, and its old temp name was not
    too_long = "x" * 300 + ".txt"  # no Linux file system takes it; a crafted stream can carry it
    report = _hand_back(_tar([(longest, b"long"), (too_long, b"never"), ("plain.txt", b"plain")]), dest)
    assert report.ok, report.error
    assert sorted(p.name for p in dest.iterdir()) == sorted([longest, "plain.txt"])
    assert len(report.left_out) == 1 and "cannot take the name" in report.left_out[0]
    write_beneath(dest, "m" * 255, b"ok")  # every host writer: a fixed-length temp name
    assert (dest / ("m" * 255)).read_bytes() == b"ok"


def test_hand_back_names_with_c1_and_bidi_controls_are_refused(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    names = ["csi\u009b2J.txt", "report\u202egnp.exe", "iso\u2066late\u2069.txt", "mark\u200f.txt",
             "nel\u0085.txt", "sep\u2028.txt", "ok é.txt"]
    report = _hand_back(_tar([(name, b"x") for name in names]), dest)
    assert report.ok, report.error
    assert [p.name for p in dest.iterdir()] == ["ok é.txt"]
    assert len(report.left_out) == 6 and all("bidirectional" in line for line in report.left_out)
    assert not any(ch in "".join(report.left_out) for ch in "\u009b\u202e\u2066\u200f\u0085\u2028")


# --- 8. host writers refuse links themselves ------------------------------------------------


def test_the_write_tool_refuses_a_link_anywhere_on_the_way(tmp_path: Path) -> None:
    box = _box(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "b").mkdir(parents=True)
    (box.output_dir / "a").symlink_to(elsewhere)  # as if a link had reached the host copy
    reply = box.call("write", {"path": "a/b/c.txt", "content": "through the link"})
    assert reply.is_error and "link" in reply.text, reply.text
    assert list((elsewhere / "b").iterdir()) == []


def test_copying_a_tree_never_writes_through_a_link_in_the_destination(tmp_path: Path) -> None:
    src, dest, elsewhere = tmp_path / "src", tmp_path / "dest", tmp_path / "elsewhere"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "sub" / "deeper" / "f.txt").write_text("x")
    (elsewhere / "deeper").mkdir(parents=True)
    dest.mkdir()
    (dest / "sub").symlink_to(elsewhere)
    left_out = copy_plain_tree(src, dest)
    assert list((elsewhere / "deeper").iterdir()) == []
    assert any("sub" in line and "link" in line for line in left_out), left_out


# --- 7. session-written JSON within bounds ----------------------------------------------------


@pytest.mark.parametrize("bomb", ["[" * 100_000 + "]" * 100_000, '{"entries": [' + "9" * 5000 + "]}"])
def test_a_json_bomb_record_is_a_record_problem(tmp_path: Path, bomb: str) -> None:
    record = tmp_path / "ledger.json"
    record.write_text(bomb)
    doc, problems = read_record(record, "resolver")
    assert doc is None and len(problems) == 1 and str(record) in problems[0], problems


def test_malformed_pi_output_lines_are_skipped_not_raised() -> None:
    lines = ["[" * 50_000 + "]" * 50_000, '{"type": "message_end", "message": {"usage": {"input": ' + "9" * 5000 + "}}}",
             "5", '"text"', "[1, 2]", "not json", '{"type": "message_end", "message": "flat"}']
    events = [executors._pi_event(line) for line in lines]
    assert events[:6] == [None] * 6 and events[6] == {"type": "message_end", "message": "flat"}
    assert [executors._token_count(v) for v in (12, "12", None, True, 1e308, float("nan"), -3, 7.0)] == [12, 0, 0, 0, 0, 0, 0, 7]


def test_a_bomb_in_repair_json_still_delivers_the_untouched_base(materialized: dict, tmp_path: Path) -> None:
    import hashlib
    import shutil

    from tests.support.scripted_chat import ScriptedChat, call, say
    from veriscale.harness.protocol.layout import RunLayout
    from veriscale.harness.protocol.task_protocol import ProtocolConfig, run_protocol
    from veriscale.harness.sessions.agent import AgentLimits
    from veriscale.harness.sessions.executors import BuiltinExecutor
    from veriscale.harness.workspace.contract import TaskWorkspace

    task = tmp_path / "quarterly_report"
    shutil.copytree(materialized["quarterly_report"]["dir"], task)
    ledger = {"entries": [{"id": "R1", "claim": "report.md:year-over-year revenue growth (%)",
                           "question": "Which growth figure is right?", "checks": ["read workspace inputs"],
                           "findings": "Restated base gives 20.0%", "verdict": "20"}]}
    challenger = {"entries": [{"id": "C1", "claim": "active customers at quarter end = 1,240", "attempt": "compare",
                               "finding": "1,240 is the Q2 figure", "holds": False, "because": "the Q3 row says 1,310"}]}
    finish = {"base": "r01", "reason": "best base", "revisions": [], "unresolved": []}
    bomb = "[" * 200_000 + "]" * 200_000
    chat = ScriptedChat({
        "resolve": [call("write", path="ledger.json", content=json.dumps(ledger)), say("done")],
        "challenge": [call("write", path="ledger.json", content=json.dumps(challenger)), say("done")],
        "adjudicate": [call("write", path="finish.json", content=json.dumps(finish)), say("done")],
        "deliver": [call("write", path="out/deliverables/report.md", content="garbage"),
                    call("write", path="repair.json", content=bomb), say("done"), say("done")],
    })
    config = ProtocolConfig(model_uri="scripted", no_jail=True, limits=AgentLimits(max_steps=8, wall_clock_s=120))
    outcome = run_protocol(task, RunLayout.for_task(task, "t"), config, BuiltinExecutor(chat))
    assert outcome["phases"]["deliver"]["status"] == "failed"
    assert "nests arrays or objects more than 100 deep" in outcome["phases"]["deliver"]["reason"]
    assert outcome["outcome"] == "delivered base unchanged"
    base = TaskWorkspace.open(task).rollouts[0].relative_deliverables()["report.md"]
    delivered = RunLayout.for_task(task, "t").deliverables_dir / "report.md"
    assert hashlib.sha256(delivered.read_bytes()).digest() == hashlib.sha256(base.read_bytes()).digest()


def test_host_json_writes_never_go_through_a_planted_link(tmp_path: Path) -> None:
    from veriscale.harness.jsonfiles import read_json, write_json

    folder, victim = tmp_path / "session", tmp_path / "victim.txt"
    folder.mkdir()
    victim.write_text("untouched")
    (folder / "repair.json.tmp").symlink_to(victim)  # the old temp name, planted
    (folder / "repair.json").symlink_to(victim)
    write_json(folder / "repair.json", {"base": "r01", "changes": []})
    assert victim.read_text() == "untouched"
    assert not (folder / "repair.json").is_symlink() and read_json(folder / "repair.json")["base"] == "r01"
