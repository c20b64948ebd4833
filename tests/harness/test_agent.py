"""The built-in agent loop and its tools, driven by the scripted chat test double."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests.support.scripted_chat import ScriptedChat, call, calls, say
from veriscale.harness.sessions.agent import AgentLimits, AgentSession, Transcript, tool_calls_from_content
from veriscale.harness.sessions.tools import ToolBox
from veriscale.models.base import ChatResponse


@pytest.fixture()
def box(tmp_path: Path) -> ToolBox:
    task = tmp_path / "task"
    (task / "spec").mkdir(parents=True)
    (task / "spec" / "task.md").write_text("line one\nline two\nline three\n")
    (task / "workspace").mkdir()
    (task / "workspace" / "data.csv").write_text("id,amount\n1,10\n2,20\n")
    (tmp_path / "secret.txt").write_text("answer key")
    return ToolBox(task_dir=task, output_dir=tmp_path / "out", no_jail=True)


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _session(chat: ScriptedChat, box: ToolBox, tmp_path: Path, **limits) -> AgentSession:
    return AgentSession(chat, box, Transcript(tmp_path / "t.jsonl"), AgentLimits(**limits))


def test_read_tools_see_only_visible_folders(box: ToolBox, tmp_path: Path) -> None:
    assert box.call("read", {"path": "spec/task.md", "start_line": 2, "end_line": 2}).text == "2\tline two"
    assert "data.csv" in box.call("ls", {"path": "workspace"}).text
    assert "workspace/data.csv:3:2,20" in box.call("grep", {"pattern": r"^2,", "path": "workspace"}).text
    assert box.call("find", {"pattern": "*.csv"}).text.endswith("data.csv")
    outside = box.call("read", {"path": str(tmp_path / "secret.txt")})
    assert outside.is_error and "outside the folders" in outside.text
    escape = box.call("read", {"path": "../secret.txt"})
    assert escape.is_error
    assert box.call("grep", {"pattern": "("}).is_error


def test_write_lands_only_under_the_output_folder(box: ToolBox, tmp_path: Path) -> None:
    ok = box.call("write", {"path": "notes/a.txt", "content": "x"})
    assert not ok.is_error and (tmp_path / "out" / "notes" / "a.txt").read_text() == "x"
    for bad in ("../escape.txt", str(tmp_path / "task" / "spec" / "task.md"), "/etc/x"):
        result = box.call("write", {"path": bad, "content": "y"})
        assert result.is_error and "outside your output folder" in result.text
    assert (tmp_path / "task" / "spec" / "task.md").read_text().startswith("line one")
    assert not (tmp_path / "escape.txt").exists()


def test_run_executes_a_command_with_the_output_folder_as_cwd(box: ToolBox, tmp_path: Path) -> None:
    result = box.call("run", {"command": "pwd; echo hi > made.txt"})
    assert not result.is_error and "exit code: 0" in result.text
    assert str(tmp_path / "out") in result.text
    assert (tmp_path / "out" / "made.txt").read_text() == "hi\n"


def test_a_session_that_writes_its_record_completes_and_logs_everything(box: ToolBox, tmp_path: Path) -> None:
    chat = ScriptedChat({"unknown": [
        call("read", path="spec/task.md"),
        call("write", path="record.json", content='{"ok": true}'),
        say("done"),
    ]})
    outcome = _session(chat, box, tmp_path).run("sys", "go", record=tmp_path / "out" / "record.json")
    assert outcome.status == "completed" and outcome.steps == 2 and outcome.calls == 3
    assert outcome.prompt_tokens == 300 and not outcome.nudged
    events = _events(tmp_path / "t.jsonl")
    kinds = [e["type"] for e in events]
    assert kinds.count("call") == 3 and kinds.count("tool") == 2 and kinds[-1] == "end"
    assert all("ts" in e for e in events)
    tool_results = [e["message"] for e in events if e["type"] == "message" and e["message"]["role"] == "tool"]
    assert "1\tline one" in tool_results[0]["content"]
    assert chat.tools_seen[0] == ["read", "ls", "grep", "find", "run", "write"]


def test_missing_record_gets_exactly_one_nudge_then_fails(box: ToolBox, tmp_path: Path) -> None:
    chat = ScriptedChat({"unknown": [say("I am done"), say("still done"), say("never reached")]})
    outcome = _session(chat, box, tmp_path).run("sys", "go", record=tmp_path / "out" / "ledger.json")
    assert outcome.status == "failed" and outcome.nudged and outcome.calls == 2
    assert "after one nudge" in outcome.reason
    user_turns = [m for m in chat.requests["unknown"][-1] if m["role"] == "user"]
    assert len(user_turns) == 2 and "only reminder" in user_turns[1]["content"]


def test_invalid_record_is_nudged_with_the_validation_problem(box: ToolBox, tmp_path: Path) -> None:
    record = tmp_path / "out" / "r.json"
    chat = ScriptedChat({"unknown": [
        call("write", path="r.json", content="{}"), say("done"),
        call("write", path="r.json", content='{"entries": []}'), say("fixed"),
    ]})

    def check(path: Path) -> str | None:
        return None if "entries" in json.loads(path.read_text()) else "the record has no 'entries' list."

    outcome = _session(chat, box, tmp_path).run("sys", "go", record=record, check=check)
    assert outcome.status == "completed" and outcome.nudged
    nudge = [m for m in chat.requests["unknown"][2] if m["role"] == "user"][-1]["content"]
    assert "no 'entries' list" in nudge


def test_step_limit_ends_the_session(box: ToolBox, tmp_path: Path) -> None:
    chat = ScriptedChat({"unknown": [call("ls")] * 10})
    outcome = _session(chat, box, tmp_path, max_steps=3).run("sys", "go", record=tmp_path / "out" / "x.json")
    assert outcome.status == "failed" and outcome.steps == 3 and "step limit" in outcome.reason


def test_token_limit_ends_the_session(box: ToolBox, tmp_path: Path) -> None:
    chat = ScriptedChat({"unknown": [call("ls")] * 10})
    outcome = _session(chat, box, tmp_path, max_tokens=250).run("sys", "go")
    assert outcome.calls == 3 and "token limit" in outcome.reason


def test_tool_call_written_as_plain_json_is_recovered_and_marked(box: ToolBox, tmp_path: Path) -> None:
    text = 'I will look.\n```json\n{"name": "write", "arguments": {"path": "a.txt", "content": "hi"}}\n```'
    chat = ScriptedChat({"unknown": [ChatResponse(content=text), say("done")]})
    outcome = _session(chat, box, tmp_path).run("sys", "go", record=tmp_path / "out" / "a.txt")
    assert outcome.status == "completed" and outcome.recovered_calls == 1
    events = _events(tmp_path / "t.jsonl")
    assert any(e["type"] == "call" and e["recovered_from_content"] for e in events)
    assert any(e["type"] == "note" and "recovered from plain message content" in e["text"] for e in events)


def test_recovery_accepts_common_shapes_and_ignores_unknown_tools() -> None:
    names = {"read", "ls"}
    tagged = '<tool_call>{"name": "read", "arguments": "{\\"path\\": \\"x\\"}"}</tool_call>'
    assert json.loads(tool_calls_from_content(tagged, names)[0]["function"]["arguments"]) == {"path": "x"}
    wrapped = '[{"function": {"name": "ls", "parameters": {}}}]'
    assert tool_calls_from_content(wrapped, names)[0]["function"]["name"] == "ls"
    assert tool_calls_from_content('{"name": "rm", "arguments": {}}', names) == []
    assert tool_calls_from_content("no json here", names) == []


def test_bad_arguments_and_unknown_tools_come_back_as_tool_errors(box: ToolBox, tmp_path: Path) -> None:
    broken = ChatResponse(content="", tool_calls=[{"id": "1", "type": "function",
                                                   "function": {"name": "read", "arguments": "{not json"}}])
    chat = ScriptedChat({"unknown": [broken, calls(("delete", {})), say("ok")]})
    outcome = _session(chat, box, tmp_path).run("sys", "go")
    assert outcome.status == "completed"
    tool_msgs = [m for m in chat.requests["unknown"][-1] if m["role"] == "tool"]
    assert "not valid JSON" in tool_msgs[0]["content"] and "unknown tool 'delete'" in tool_msgs[1]["content"]


def test_a_session_resumes_from_its_transcript(box: ToolBox, tmp_path: Path) -> None:
    chat = ScriptedChat({"unknown": [say("first"), say("second")]})
    _session(chat, box, tmp_path).run("system text", "hello")
    resumed = AgentSession.resume(chat, box, Transcript(tmp_path / "t.jsonl"))
    resumed.continue_with("more")
    last = chat.requests["unknown"][-1]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user"]
    assert last[0]["content"] == "system text" and last[2]["content"] == "first"


def test_wall_clock_limit_stops_waiting_for_a_slow_model(box: ToolBox, tmp_path: Path) -> None:
    release, answered = threading.Event(), threading.Event()

    def slow(messages):
        release.wait(120)  # hang guard only: the test releases it as soon as the session has returned
        answered.set()
        return say("late")

    chat = ScriptedChat({"unknown": [slow]})
    try:
        outcome = _session(chat, box, tmp_path, wall_clock_s=0.2).run("sys", "go", record=tmp_path / "out" / "r.json")
        gave_up_first = not answered.is_set()  # the session returned while the model still had not answered
    finally:
        release.set()
    assert gave_up_first, "the session waited for the slow model instead of stopping at its time limit"
    assert outcome.status == "failed" and "time limit (0.2 s) during a model call" in outcome.reason
    assert outcome.calls == 0  # the call was abandoned, not counted as answered
    notes = [e.get("text") for e in _events(tmp_path / "t.jsonl") if e.get("type") == "note"]
    assert "time limit reached while waiting for the model" in notes, notes
