"""Codex CLI and Claude Code, the real npm binaries, each run one turn through ``veriscale serve``'s
proxy, offline: Codex through ``/v1/responses``, Claude Code through ``/v1/messages``.

Behind the proxy: 2 candidates from the llama.cpp tool-calling server (tests/support/llama_tools_server,
SmolLM2-135M), verified by the server's ``--model embedded`` when they differ. The settings are the
ones docs/AGENT_CLIS.md gives. Each test checks that

- the CLI exits 0 and what it prints is the candidate the proxy picked (the store's run says which);
- the store holds an ok ``proxy responses`` / ``proxy anthropic`` run for the CLI's request, with
  both candidates, so the traffic really went through the proxy;
- the server's access log shows no request it refused (404 on a path, 400 on a field, 401);
- nothing went past 127.0.0.1: HTTP(S)_PROXY / ALL_PROXY point at a local guard that records and
  refuses every request (NO_PROXY keeps the proxy itself direct), and the guard saw none.

The server runs as ``python -m veriscale serve`` with uvicorn's access log switched on (the CLI's
``serve`` logs warnings only), so the requests each CLI made can be read back.

Needs the CLIs: ``sh scripts/install-test-tools.sh`` (pinned @openai/codex and @anthropic-ai/claude-code
into .tools/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.llama_tools_server import MODEL_ID, tools_server_url
from veriscale.engine.store import Store

pytestmark = [pytest.mark.server, pytest.mark.embedded]

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".tools" / "node_modules" / ".bin"
CODEX_VERSION = "0.171.0"
CLAUDE_CODE_VERSION = "2.1.332"
TOKEN = "veriscale-agent-cli-test-token"
CLI_TIMEOUT_S = 150

# The [proxy] table of the config file (VERISCALE_CONFIG). Codex sends no max_output_tokens (the
# proxy's max_tokens applies); Claude Code sends no temperature, so this low one applies to it too.
# progress = false: no conversation tracking on a small box.
PROXY_TOML = """\
[proxy]
temperature = 0.3
max_tokens = 64
timeout_s = 120
progress = false

[[proxy.candidates]]
model = "{upstream}"
n = 2
"""

# Codex: a custom Responses provider at the proxy, the token from $VERISCALE_TOKEN, every
# background service off, and its own (short) instructions so the prompt fits the small model.
CODEX_TOML = """\
model = "veriscale"
model_provider = "veriscale"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false
web_search = "disabled"
model_instructions_file = "{instructions}"
include_environment_context = false
include_permissions_instructions = false
include_apps_instructions = false
include_collaboration_mode_instructions = false
model_context_window = 8192

[features]
plugins = false
apps = false
goals = false
tool_suggest = false
image_generation = false
shell_snapshot = false

[skills]
include_instructions = false

[skills.bundled]
enabled = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
trace_exporter = "none"
metrics_exporter = "none"

[history]
persistence = "none"

[model_providers.veriscale]
name = "veriscale"
base_url = "{base_url}/v1"
env_key = "VERISCALE_TOKEN"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"""
CODEX_INSTRUCTIONS = "Respond with a message, not a function call.\n"
# llama-cpp-python's chatml-function-calling picks "functions.<name>:" or "message:" greedily; with
# Codex's four tools the 135M model picks a tool for every other prompt tried, and as that template
# leaves tool results out, it calls it again on every later request: the turn would never end.
CODEX_PROMPT = "message: hello"

CLAUDE_SYSTEM = "Answer with one word."
CLAUDE_PROMPT = "Say hello."
# Claude Code fails on a reply that stopped at its output limit. At temperature 0.3 the 135M model
# ran past 256 tokens on 13% of samples of this prompt (its system prompt carries the date and the
# folder, so the reply varies from run to run) and past 1024 on 5%; the proxy leaves a cut candidate
# out while the other finished, so a turn fails only when both candidates run on past 1024.
CLAUDE_MAX_OUTPUT_TOKENS = "1024"

# `veriscale serve` with uvicorn's access log on (the command itself logs warnings only).
SERVE = ("import sys, uvicorn\n"
         "run = uvicorn.run\n"
         "uvicorn.run = lambda app, **kw: run(app, **{**kw, 'log_level': 'info'})\n"
         "from veriscale.cli import app\n"
         "sys.argv[0] = 'veriscale'\n"
         "app()\n")
ACCESS = re.compile(r'"(GET|POST|PUT|DELETE|HEAD|OPTIONS) (\S+) HTTP/[\d.]+" (\d{3})')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(name: str, want: str) -> Path:
    """The installed CLI, checked by its --version (a missing native binary fails here)."""
    path = BIN / name
    hint = "run `sh scripts/install-test-tools.sh` to install the pinned agent CLIs into .tools/"
    if not path.exists():
        pytest.fail(f"{path} is missing: {hint}", pytrace=False)
    out = subprocess.run([str(path), "--version"], check=False, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "CODEX_HOME": "/nonexistent"})
    if out.returncode != 0 or out.stdout.strip() != want:
        pytest.fail(f"{path} --version printed {(out.stdout + out.stderr).strip()!r}, not {want!r}: {hint}",
                    pytrace=False)
    return path


class _Guard(socketserver.ThreadingTCPServer):
    """Where HTTP(S)_PROXY points: records each request line (CONNECT host:443, GET http://...)
    and refuses it, so a CLI that tried to reach another host fails fast and is seen."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.seen: list[str] = []
        guard = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                guard.seen.append(self.rfile.readline(8192).decode("latin-1").strip())
                self.wfile.write(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@dataclass
class Served:
    url: str
    store: Path
    log: Path
    guard: _Guard

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request the server answered, from its access log."""
        return [(m, p, int(s)) for m, p, s in ACCESS.findall(self.log.read_text(errors="replace"))]

    def runs(self, command: str) -> list:
        return [r for r in Store.open(self.store).runs() if r.command == command]

    def offline_env(self, home: Path) -> dict[str, str]:
        """A bare environment: a temp HOME, node on PATH, every proxy variable at the guard."""
        node = shutil.which("node")
        assert node, "node is not on PATH (the npm CLIs' launchers need it)"
        path = os.pathsep.join(dict.fromkeys([str(Path(node).parent), "/usr/local/bin", "/usr/bin", "/bin"]))
        tmp = home / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env = {"PATH": path, "HOME": str(home), "TMPDIR": str(tmp), "LANG": "C.UTF-8", "TERM": "dumb",
               "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
            env[name] = env[name.lower()] = self.guard.url
        return env


@contextmanager
def _proxy_server(tmp_path: Path) -> Iterator[Served]:
    config = tmp_path / "veriscale.toml"
    config.write_text(PROXY_TOML.format(upstream=f"{tools_server_url()}#{MODEL_ID}"))
    port, log, store = _free_port(), tmp_path / "serve.log", tmp_path / "store.sqlite3"
    env = {**os.environ, "VERISCALE_CONFIG": str(config), "VERISCALE_TOKEN": TOKEN}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", SERVE, "serve", "--store", str(store), "--port", str(port),
                                 "--model", "embedded"], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    guard = _Guard()
    threading.Thread(target=guard.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"veriscale serve exited: {log.read_text()}"
            try:
                if httpx.get(url + "/api/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"veriscale serve did not come up: {log.read_text()}"
            time.sleep(0.25)
        yield Served(url, store, log, guard)
    finally:
        guard.shutdown()
        guard.server_close()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, check=False, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=CLI_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{Path(cmd[0]).name} ran past {CLI_TIMEOUT_S} s: {exc.stdout!r} {exc.stderr!r}") from None


def _check_proxied(served: Served, command: str, path: str) -> list:
    """The ok proxy runs of the CLI's requests, and nothing refused or sent off the machine."""
    answered = [r for r in served.requests() if r[1] != "/api/health"]
    assert answered and all(p.split("?")[0] == path for _, p, _ in answered), answered
    assert all(200 <= s < 300 for _, _, s in answered), f"refused: {answered}\n{served.log.read_text()}"
    assert served.guard.seen == [], f"tried to leave 127.0.0.1: {served.guard.seen}"
    runs = served.runs(command)
    assert len(runs) == len(answered), (runs, answered)
    for run in runs:
        assert run.status == "ok", run.result
        assert run.args["n"] == 2 and len(run.result["candidates"]) == 2, run.result
        assert all(c["reply"] is not None for c in run.result["candidates"]), run.result["candidates"]
        assert run.result["how"] in ("agreed", "verified", "verification failed", "only one valid",
                                     "only one complete"), run.result
    return runs


def _winner_text(run) -> str:
    return next(c for c in run.result["candidates"] if c["index"] == run.result["winner"])["reply"]["text"]


def test_codex_exec_runs_one_turn_through_the_proxy_responses_api(tmp_path: Path) -> None:
    codex = _cli("codex", f"codex-cli {CODEX_VERSION}")
    home, work = tmp_path / "home", tmp_path / "work"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    work.mkdir()
    instructions = codex_home / "instructions.md"
    instructions.write_text(CODEX_INSTRUCTIONS)
    last = tmp_path / "last-message.txt"
    with _proxy_server(tmp_path) as served:
        (codex_home / "config.toml").write_text(CODEX_TOML.format(base_url=served.url, instructions=instructions))
        env = {**served.offline_env(home), "CODEX_HOME": str(codex_home), "VERISCALE_TOKEN": TOKEN}
        out = _run([str(codex), "exec", "--strict-config", "--skip-git-repo-check", "--ephemeral", "--json",
                    "--color", "never", "-C", str(work), "-o", str(last), CODEX_PROMPT], env, work)
        assert out.returncode == 0, f"codex exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
        (run,) = _check_proxied(served, "proxy responses", "/v1/responses")
    # TMPDIR outside CODEX_HOME: under a temp dir Codex makes no helper links and its sandbox cannot start
    assert "could not create PATH aliases" not in out.stderr, out.stderr

    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert any(e.get("type") == "turn.completed" for e in events), out.stdout
    assert not any(e.get("type") in ("error", "turn.failed") for e in events), out.stdout
    # Codex's own tools reached the upstream, and it ended the turn on the proxy's pick
    assert {"exec_command", "write_stdin"} <= set(run.args["tools"]), run.args
    assert run.args["api"] == "responses" and run.args["stream"] is True
    said = last.read_text() if last.exists() else ""
    assert said.strip() == _winner_text(run).strip(), (said, run.result)


def test_claude_code_print_runs_one_turn_through_the_proxy_messages_api(tmp_path: Path) -> None:
    claude = _cli("claude", f"{CLAUDE_CODE_VERSION} (Claude Code)")
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with _proxy_server(tmp_path) as served:
        env = {**served.offline_env(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"),
               "ANTHROPIC_BASE_URL": served.url, "ANTHROPIC_API_KEY": TOKEN,
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
               "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
               "CLAUDE_CODE_MAX_OUTPUT_TOKENS": CLAUDE_MAX_OUTPUT_TOKENS, "CLAUDE_CODE_MAX_RETRIES": "0"}
        out = _run([str(claude), "-p", CLAUDE_PROMPT, "--model", "veriscale", "--system-prompt", CLAUDE_SYSTEM,
                    "--tools", "", "--output-format", "json", "--no-session-persistence"], env, work)
        assert out.returncode == 0, f"claude exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
        runs = _check_proxied(served, "proxy anthropic", "/v1/messages")

    result = json.loads(out.stdout)
    assert result["is_error"] is False and result["terminal_reason"] == "completed", result
    # one turn; Claude Code may add a side request of its own (seen once in a full-suite run: two
    # /v1/messages requests, both proxied, picked and checked above), so the turn's run is the one whose
    # winner Claude Code printed
    assert 1 <= len(runs) <= 2, runs
    (run,) = [r for r in runs if _winner_text(r).strip() == result["result"].strip()] or [None]
    assert run is not None, (result["result"], [r.result for r in runs])
    assert run.args["api"] == "anthropic" and run.args["stream"] is True and run.args["tools"] == []
