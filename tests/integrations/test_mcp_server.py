"""``veriscale mcp`` driven by the official ``mcp`` SDK's own client, over stdio (the server a
subprocess, ``python -m veriscale mcp``) and over streamable HTTP (the same command with
``--transport http`` on a free loopback port). The model is a real OpenAI-compatible HTTP test double
(tests/support/fault_server.py) whose requests can be held, so a cancel lands while calls are in flight.

Checked: the tools listed with their input schemas; score, compare, select, track and runs called, each
structured result valid against veriscale's JSON schema of that command's ``--json``; a path outside the
allow-list and a wrong argument type each an error result of one sentence, the server answering the
next call; a long ``select`` cancelled mid-flight, its run and its in-flight calls recorded ``cancelled``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

# the test extra installs mcp: without it these tests fail at import, never skip
from jsonschema import validate
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.fault_server import FaultServer
from veriscale import schemas
from veriscale.engine.store import Store

REPO = Path(__file__).resolve().parents[2]
GUARD_S = 60  # a hang guard only: every wait below ends on an event
TOOLS = {"score", "compare", "select", "track", "runs"}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]), "VERISCALE_QUIET": "1"}


def _args(srv: FaultServer, store: Path, allowed: Path) -> list[str]:
    return ["-m", "veriscale", "mcp", "--model", f"{srv.url}#fault-model", "--store", str(store),
            "--allow-dir", str(allowed)]


@contextlib.asynccontextmanager
async def _stdio(srv: FaultServer, store: Path, allowed: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=_args(srv, store, allowed), env=_env(), cwd=str(REPO))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def _http(srv: FaultServer, store: Path, allowed: Path) -> AsyncIterator[ClientSession]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, *_args(srv, store, allowed), "--transport", "http", "--port", str(port)],
                            cwd=REPO, env=_env(), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + GUARD_S
        while True:  # until it listens
            assert proc.poll() is None, proc.communicate()[1]
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "hang guard: the HTTP server never listened"
            await anyio.sleep(0.05)
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session
    finally:
        proc.terminate()
        proc.communicate(timeout=GUARD_S)


TRANSPORTS = {"stdio": _stdio, "http": _http}


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _one_sentence(text: str) -> bool:
    return "\n" not in text and "Traceback" not in text and text.count(". ") == 0


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "task.md").write_text("Say hello to the user.\n")
    for name, text in (("a.md", "Hello!"), ("b.md", "Goodbye."), ("c.md", "Hi there, user.")):
        (allowed / name).write_text(text)
    messages = [{"role": "user", "content": "Say hello to the user."},
                {"role": "assistant", "content": "I will greet them."}, {"role": "assistant", "content": "Hello!"}]
    (allowed / "run.json").write_text(json.dumps({"messages": messages}))  # an OpenAI chat transcript
    outside = tmp_path / "outside.md"
    outside.write_text("secret")
    return {"allowed": allowed, "outside": outside, "store": tmp_path / "runs.sqlite3"}


async def _check_tools(session: ClientSession, files: dict[str, Path]) -> None:
    listed = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(listed) == TOOLS
    props = {name: set(tool.input_schema["properties"]) for name, tool in listed.items()}
    assert {"task", "candidate", "criteria"} <= props["score"]
    assert {"task", "a", "b"} <= props["compare"]
    assert {"candidates", "paths", "task", "task_file", "method", "k"} <= props["select"]
    assert {"paths", "steps", "task", "every", "checkpoints"} <= props["track"]
    assert props["runs"] == {"limit"}
    assert listed["score"].input_schema["required"] == ["task", "candidate"]
    assert listed["select"].input_schema["properties"]["k"]["type"] == "integer"
    for name in ("score", "compare", "select", "track"):
        assert listed[name].output_schema == schemas.load(name)

    allowed = files["allowed"]
    calls: dict[str, dict[str, Any]] = {
        "score": {"task": "Say hello.", "candidate": "Hello!"},
        "compare": {"task": "Say hello.", "a": "Hello!", "b": "Goodbye."},
        "select": {"task": "Say hello.", "candidates": ["Hello!", "Goodbye.", "Hi."], "method": "round_robin"},
        "track": {"task": "Say hello.", "steps": [{"text": "read it"}, {"text": "said hello"}]},
    }
    for name, arguments in calls.items():
        result = await session.call_tool(name, arguments)  # the SDK validates it against the output schema too
        assert not result.is_error, _text(result)
        doc = result.structured_content
        assert doc["schema"] == f"veriscale.{name}/1" and isinstance(doc["run_id"], int)
        validate(doc, schemas.load(name))
        assert json.loads(_text(result)) == doc  # the text block is the same JSON, for clients that read text

    by_path = await session.call_tool("select", {"paths": [str(allowed / n) for n in ("a.md", "b.md", "c.md")],
                                                 "task_file": str(allowed / "task.md")})
    assert not by_path.is_error, _text(by_path)
    validate(by_path.structured_content, schemas.load("select"))
    tracked = await session.call_tool("track", {"paths": [str(allowed / "run.json")],
                                                "task_file": str(allowed / "task.md")})
    assert not tracked.is_error, _text(tracked)
    validate(tracked.structured_content, schemas.load("track"))
    assert len(tracked.structured_content["curves"]) == 1

    runs = await session.call_tool("runs", {"limit": 10})
    assert not runs.is_error, _text(runs)
    for item in runs.structured_content["runs"]:
        validate(item, schemas.load("runs-list"))
    assert [r["command"] for r in runs.structured_content["runs"]][:6] == [
        "track", "select", "track", "select", "compare", "score"]

    refused = await session.call_tool("select", {"paths": [str(files["outside"]), str(allowed / "a.md")],
                                                 "task": "Say hello."})
    assert refused.is_error and refused.structured_content is None
    said = _text(refused)
    assert "is outside the folders this server may read" in said and "--allow-dir" in said and _one_sentence(said)

    wrong = await session.call_tool("select", {"candidates": "Hello!", "k": "two", "task": "Say hello."})
    assert wrong.is_error
    said = _text(wrong)
    assert said.startswith("the select tool's argument ") and _one_sentence(said)
    wrong_score = await session.call_tool("score", {"task": ["not", "text"], "candidate": "Hello!"})
    assert wrong_score.is_error and "argument 'task'" in _text(wrong_score)

    unknown = await session.call_tool("verify", {})
    assert unknown.is_error and _one_sentence(_text(unknown))

    again = await session.call_tool("runs", {"limit": 1})  # the server still answers
    assert not again.is_error and len(again.structured_content["runs"]) == 1


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_the_sdk_client_lists_calls_and_is_refused_in_one_sentence(transport: str, files: dict[str, Path]) -> None:
    async def main() -> None:
        with anyio.fail_after(GUARD_S * 2):
            async with TRANSPORTS[transport](srv, files["store"], files["allowed"]) as session:
                await _check_tools(session, files)

    with FaultServer() as srv:
        anyio.run(main)


async def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + GUARD_S
    while not condition():
        assert time.monotonic() < deadline, f"hang guard: {what}"
        await anyio.sleep(0.05)  # the client's loop goes on (over HTTP it still has the cancel to send)


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_a_cancelled_select_stops_its_calls_and_is_recorded_cancelled(transport: str, files: dict[str, Path]) -> None:
    progress: list[tuple[float, float | None]] = []
    candidates = [f"Answer number {i}." for i in range(8)]  # round robin: 28 pairs, many calls

    async def main() -> None:
        with anyio.fail_after(GUARD_S * 2):
            async with TRANSPORTS[transport](srv, files["store"], files["allowed"]) as session:
                async def on_progress(done: float, total: float | None, message: str | None) -> None:
                    progress.append((done, total))

                async def long_select() -> None:
                    await session.call_tool("select", {"task": "Pick the best.", "candidates": candidates,
                                                       "method": "round_robin", "adaptive": False},
                                            progress_callback=on_progress)

                async with anyio.create_task_group() as group:
                    group.start_soon(long_select)
                    while not (progress and srv.in_flight > 0):  # calls answered, reported, and one held
                        await anyio.sleep(0.05)
                    group.cancel_scope.cancel()  # the SDK client sends notifications/cancelled
                store = Store.open(files["store"])
                try:
                    await _wait_for(lambda: store.runs(1)[0].status == "cancelled", "the run recorded cancelled")
                    run = store.runs(1)[0]
                    statuses = [c["status"] for c in store.run_calls(run.id)]
                finally:
                    store.close()
                after = await session.call_tool("runs", {"limit": 1})  # the server goes on answering
                assert not after.is_error and after.structured_content["runs"][0]["status"] == "cancelled"
                assert run.command == "select"
                assert "cancelled" in statuses and "ok" in statuses  # in flight: cancelled; answered: kept
                assert len(statuses) < 28 * 4  # it stopped: far fewer than the plan's calls

    with FaultServer() as srv:
        srv.hold_after(6)  # six calls are answered, the rest wait at the server until the cancel
        anyio.run(main)
    assert progress and all(total and done <= total for done, total in progress)


@pytest.mark.parametrize("how", ["config", "flag", "off"])
def test_the_runs_tool_redacts_what_leaves_the_store_as_runs_list_does(how: str, files: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    """The config's ``[redact]`` patterns, ``--redact`` and ``--no-redact`` reach the runs tool: here the
    pattern matches the judge's model name, which every run records."""
    config = tmp_path / "config.toml"
    config.write_text('[redact]\npatterns = ["fault-mod[a-z]+"]\n' if how == "config" else "")
    extra = {"config": [], "flag": ["--redact", "fault-mod[a-z]+"], "off": ["--no-redact"]}[how]
    seen: dict[str, Any] = {}

    async def main() -> None:
        params = StdioServerParameters(command=sys.executable, args=[*_args(srv, files["store"], files["allowed"]),
                                                                     *extra],
                                       env={**_env(), "VERISCALE_CONFIG": str(config)}, cwd=str(REPO))
        with anyio.fail_after(GUARD_S * 2):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                scored = await session.call_tool("score", {"task": "Say hello.", "candidate": "Hello!"})
                assert not scored.is_error, _text(scored)
                listed = await session.call_tool("runs", {"limit": 5})
                assert not listed.is_error, _text(listed)
                seen.update(listed.structured_content["runs"][0], text=_text(listed))

    with FaultServer() as srv:
        anyio.run(main)
    if how == "off":
        assert seen["model"].endswith("#fault-model")
    else:
        assert seen["model"].endswith("#[redacted:custom]") and "fault-model" not in seen["text"]
    store = Store.open(files["store"])
    try:  # the store keeps the raw text
        assert store.runs(1)[0].model.endswith("#fault-model")
    finally:
        store.close()


def test_a_missing_sdk_is_one_sentence_naming_the_extra() -> None:
    code = ("import sys; sys.modules['mcp'] = None; from typer.testing import CliRunner; from veriscale.cli import app; "
            "r = CliRunner().invoke(app, ['mcp']); print(r.exit_code); print(r.output)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=GUARD_S)
    lines = done.stdout.splitlines()
    assert lines[0] == "2", done.stdout + done.stderr
    said = " ".join(" ".join(lines[1:]).split())
    assert "pip install 'veriscale[mcp]'" in said and "Traceback" not in said


@pytest.mark.embedded
def test_the_embedded_model_scores_through_the_stdio_server(files: dict[str, Path]) -> None:
    """The default judge, for real: one score over stdio, with progress per finished call."""
    progress: list[float] = []

    async def main() -> None:
        params = StdioServerParameters(command=sys.executable, env=_env(), cwd=str(REPO), args=[
            "-m", "veriscale", "mcp", "--model", "embedded", "--store", str(files["store"])])
        with anyio.fail_after(GUARD_S * 3):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()

                async def on_progress(done: float, total: float | None, message: str | None) -> None:
                    progress.append(done)

                result = await session.call_tool("score", {"task": "Say hello.", "candidate": "Hello!",
                                                           "criteria": "general"}, progress_callback=on_progress)
                assert not result.is_error, _text(result)
                validate(result.structured_content, schemas.load("score"))
                assert 0 <= result.structured_content["reward"] <= 1
                refused = await session.call_tool("track", {"paths": [str(files["allowed"] / "run.json")]})
                assert refused.is_error and "this server may read no folder" in _text(refused)

    anyio.run(main)
    assert progress and progress[-1] >= 1
