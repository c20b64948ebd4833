"""The pi executor (npm @mariozechner/pi-coding-agent) against a real llama.cpp server, in the jail.

Needs pi installed: ``npm install --prefix .tools @mariozechner/pi-coding-agent@0.73.1``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.llama_tools_server import MODEL_ID, tools_server_url
from veriscale.errors import UserError
from veriscale.harness.sessions.agent import AgentLimits
from veriscale.harness.sessions.executors import PiExecutor, SessionSpec

pytestmark = pytest.mark.server


def test_pi_runs_a_jailed_session_against_the_server_and_is_recorded(tmp_path: Path) -> None:
    task = tmp_path / "task"
    (task / "spec").mkdir(parents=True)
    (task / "spec" / "task.md").write_text("Say hello.\n")
    run_dir = tmp_path / "task.runs" / "r"
    record = run_dir / "sessions" / "resolve" / "ledger.json"
    spec = SessionSpec(
        phase="resolve", system_prompt="Phase: resolve\nYou are terse.", user_prompt="Reply with one word.",
        task_dir=task, output_dir=record.parent, transcript_path=run_dir / "transcripts" / "resolve.jsonl",
        model_uri=f"{tools_server_url()}#{MODEL_ID}", record_path=record,
        limits=AgentLimits(max_tokens_per_call=16, wall_clock_s=180), no_jail=False)
    result = PiExecutor().run_session(spec)

    events = [json.loads(line) for line in spec.transcript_path.read_text().splitlines()]
    pi_events = [e["event"]["type"] for e in events if e["type"] == "pi_event"]
    assert "agent_end" in pi_events, events[-3:]
    assert "model relay refused" not in spec.transcript_path.read_text(), "pi's own calls pass the relay's policy"
    assert result.executor == "pi" and result.calls >= 1
    assert (result.status == "completed") == record.is_file()
    if not record.is_file():
        # one nudge, then failure (or the wall-clock limit, on a busy machine)
        assert result.nudged or "time limit" in result.reason
        assert "after one nudge" in result.reason or "time limit" in result.reason
        assert sum(1 for e in events if e["type"] == "note" and e["text"].startswith("nudge")) <= 1
    assert events[-1]["type"] == "end"


def test_pi_needs_an_http_model_uri(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    spec = SessionSpec(phase="resolve", system_prompt="s", user_prompt="u", task_dir=tmp_path / "t",
                       output_dir=tmp_path / "o", transcript_path=tmp_path / "x.jsonl", model_uri="embedded",
                       no_jail=True)
    with pytest.raises(UserError, match="OpenAI-compatible server URI"):
        PiExecutor().run_session(spec)
