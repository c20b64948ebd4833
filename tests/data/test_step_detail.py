"""A step's structure for the trajectory viewer: tool calls with the result tied to each, and
per-step time and tokens where the format has them (ATIF), stored and read back by ``RunLog``."""

from __future__ import annotations

import json
from pathlib import Path

from veriscale.data.importers import atif, openai_messages
from veriscale.data.model import Step
from veriscale.engine.run_log import RunLog
from veriscale.engine.store import Store

REPO = Path(__file__).resolve().parents[2]
ATIF_TRIAL = REPO / "examples" / "progress" / "success_trajectory.json"


def test_an_atif_step_keeps_its_time_tokens_and_each_result_under_its_call() -> None:
    (cand,) = atif.load(json.loads(ATIF_TRIAL.read_text()), "success_trajectory.json")
    first = cand.trajectory.steps[0]
    assert first.metrics["timestamp"] == "2025-10-31T10:49:08.385646+00:00"
    assert first.metrics["prompt_tokens"] == 871 and first.metrics["completion_tokens"] == 1366
    assert [c["id"] for c in first.tool_calls] == ["call_0_1"] and list(first.tool_results) == ["call_0_1"]
    assert first.tool_results["call_0_1"] in first.observation  # the same output, now tied to its call


def test_a_chat_tool_result_is_tied_to_the_call_it_answers() -> None:
    messages = [{"role": "user", "content": "List and count."},
                {"role": "assistant", "content": "Two commands.", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "wc", "arguments": "{\"l\": true}"}}]},
                {"role": "tool", "tool_call_id": "c2", "content": "42"},
                {"role": "tool", "tool_call_id": "c1", "content": "a b"}]
    (cand,) = openai_messages.load(messages, "chat.json")
    (step,) = cand.trajectory.steps
    assert step.tool_results == {"c2": "42", "c1": "a b"}
    assert step.metrics == {}  # chat messages carry no per-step time or tokens


def test_the_store_keeps_the_steps_structure_and_a_plain_step_has_none(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    run = store.start_run("select", "scripted:test-double", {})
    log = RunLog(store)
    tool = Step(role="agent", text="Looking.", tool_calls=[{"name": "bash", "arguments": {"cmd": "ls"}, "id": "c1"}],
                observation="a b", exit_code=0, tool_results={"c1": "a b"}, metrics={"prompt_tokens": 12})
    log.record_steps(run, "t", [tool, Step(role="user", text="thanks")])
    with_calls, plain = log.steps(run, "t")
    assert with_calls["detail"] == {"text": "Looking.", "tool_calls": tool.tool_calls, "tool_results": {"c1": "a b"},
                                    "observation": "a b", "exit_code": 0, "metrics": {"prompt_tokens": 12}}
    assert plain["detail"] is None and plain["text"] == "thanks"
    assert log.find_steps(run, "t", "bash") == [0]  # the search still reads the step's whole text
