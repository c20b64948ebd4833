"""Executors run one protocol session: the built-in agent loop, or the ``pi`` coding agent.

An executor takes a :class:`SessionSpec` (phase, prompts, the folders the session sees, where it
writes, the record it must leave, limits, the model) and returns a :class:`SessionResult`
(status, reason, calls, tokens, wall time)::

    executor = BuiltinExecutor()                    # backend from spec.model_uri, or BuiltinExecutor(backend=...)
    result = executor.run_session(spec)
    result.status, result.reason, result.calls, result.prompt_tokens

    executor = PiExecutor()                         # npm @mariozechner/pi-coding-agent, see below
    result = executor.run_session(spec)             # model URI must be http(s)://host:port/v1#model

:class:`PiExecutor` runs ``pi -p --mode json`` inside the jail (``run_jailed``) with a generated
``models.json`` that points pi at the OpenAI-compatible endpoint of ``spec.model_uri`` (through
the jail's model forward). Install it next to the project with::

    npm install --prefix .tools @mariozechner/pi-coding-agent@0.73.1

or point ``VERISCALE_PI`` at its ``dist/cli.js``. pi has no step or token caps of its own: the
executor enforces the wall-clock limit (process-group kill) and the per-reply token cap
(``maxTokens`` in models.json), and records steps and tokens as pi reports them (llama.cpp's
streaming replies carry no usage, so tokens read 0 there and ``tokens_reported`` is false).
Continuing a session (delivery after adjudication) reuses pi's session file in the output folder.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from veriscale.data.reader import MAX_JSON_DEPTH, MAX_NUMBER_CHARS, BadInput, parse_json
from veriscale.engine.sync_facade import CallExecutor
from veriscale.engine.gateway import CHAT_KEY_VERSION
from veriscale.engine.store import Store
from veriscale.errors import UserError, setting
from veriscale.settings import environment
from veriscale.harness.safe_fs import resolved
from veriscale.harness.sessions.agent import AgentLimits, AgentSession, RecordCheck, Transcript, nudge_text
from veriscale.harness.jail.sandbox import HARVEST_GRACE_S, JailLimits, JailSpec, run_jailed
from veriscale.harness.jail.netjail import inside_model_url
from veriscale.harness.jail.relay_gate import RelayPolicy
from veriscale.harness.sessions.result import SessionResult
from veriscale.harness.sessions.tools import DEFAULT_RUN_TIMEOUT_S, ToolBox
from veriscale.models.base import ModelBackend

PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"
PI_INSTALL = f"npm install --prefix .tools {PI_PACKAGE}@{PI_VERSION}"
PI_MIN_NODE = (20, 6)
PI_TOOLS = "read,bash,edit,write,grep,find,ls"
PI_SESSION_DIR = ".pi-session"
#: What pi sends as its key; the jail's relay drops it and adds the host's Authorization header.
RELAY_KEY_PLACEHOLDER = "veriscale-relay-adds-the-key"


@dataclass
class SessionSpec:
    """Everything one session needs; paths outside ``task_dir``/``visible_dirs``/``output_dir`` stay hidden."""

    phase: str
    system_prompt: str
    user_prompt: str
    task_dir: Path
    output_dir: Path
    transcript_path: Path
    model_uri: str
    record_path: Path | None = None
    record_check: RecordCheck | None = None
    visible_dirs: Sequence[Path] = ()
    limits: AgentLimits = field(default_factory=AgentLimits)
    run_timeout_s: float = DEFAULT_RUN_TIMEOUT_S
    no_jail: bool = False
    continue_session: bool = False  # add a turn to the conversation saved at transcript_path
    jail_limits: JailLimits = field(default_factory=JailLimits)
    store_run_id: int | None = None  # the store's run for this task: every model call is linked to it


class Executor(Protocol):
    """Runs one session to its end; never raises for a session that merely failed."""

    name: str

    def run_session(self, session: SessionSpec) -> SessionResult:
        ...


# --- built-in ---------------------------------------------------------------------------------


class BuiltinExecutor:
    """The in-process tool-calling loop (:mod:`veriscale.harness.sessions.agent`) over a chat backend."""

    name = "builtin"

    def __init__(self, backend: ModelBackend | None = None, store: Store | None = None) -> None:
        self._backend = backend
        self.store = store
        self._loaded: dict[str, ModelBackend] = {}
        self._lock = threading.Lock()

    def backend_for(self, uri: str) -> ModelBackend:
        if self._backend is not None:
            return self._backend
        with self._lock:
            if uri not in self._loaded:
                from veriscale.models.uri import load_backend

                self._loaded[uri] = load_backend(uri)
            return self._loaded[uri]

    def run_session(self, session: SessionSpec) -> SessionResult:
        backend = self.backend_for(session.model_uri)
        toolbox = ToolBox(task_dir=session.task_dir, output_dir=session.output_dir,
                          readonly_extra=session.visible_dirs, no_jail=session.no_jail,
                          run_timeout_s=session.run_timeout_s, limits=session.jail_limits)
        transcript = Transcript(session.transcript_path)
        # Every turn goes through the gateway: cached by messages, tools and parameters, so a phase
        # rerun after a crash replays its finished turns, and each call is linked to the task's run.
        gateway = CallExecutor(backend, self.store, prompt_version=CHAT_KEY_VERSION, run_id=session.store_run_id)
        chat = functools.partial(gateway.chat, label=session.phase)
        if session.continue_session:
            agent = AgentSession.resume(backend, toolbox, transcript, session.limits, chat=chat)
            outcome = agent.continue_with(session.user_prompt, record=session.record_path, check=session.record_check)
        else:
            agent = AgentSession(backend, toolbox, transcript, session.limits, chat=chat)
            outcome = agent.run(session.system_prompt, session.user_prompt,
                                record=session.record_path, check=session.record_check)
        return SessionResult.from_outcome(
            outcome, phase=session.phase, executor=self.name,
            record_path=str(session.record_path) if session.record_path else None,
            transcript_path=str(session.transcript_path),
        )


# --- pi ---------------------------------------------------------------------------------------


def _auth_key() -> str | None:
    return environment("VERISCALE_API_KEY") or environment("OPENAI_API_KEY")


def _auth_headers() -> dict[str, str]:
    """The host's API key as a header for the relay to add (empty when no key is set)."""
    key = _auth_key()
    return {"Authorization": f"Bearer {key}"} if key else {}


def find_pi() -> Path:
    """The ``dist/cli.js`` of an installed pi; ``UserError`` with the install command if none."""
    candidates: list[Path] = []
    pi = environment("VERISCALE_PI")
    if pi:
        candidates.append(Path(pi))
    package = Path("node_modules") / PI_PACKAGE / "dist" / "cli.js"
    repo_root = Path(__file__).resolve().parents[4]
    for base in (Path.cwd(), repo_root):
        candidates.append(base / ".tools" / package)
    on_path = shutil.which("pi")
    if on_path:
        candidates.append(Path(on_path).resolve())
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise UserError(f"the pi executor needs the npm package {PI_PACKAGE}: run `{PI_INSTALL}` in the project "
                    "folder, or set VERISCALE_PI to its dist/cli.js")


def check_node() -> str:
    """The path of a ``node`` new enough for pi; ``UserError`` otherwise."""
    node = shutil.which("node")
    if node is None:
        raise UserError(f"the pi executor needs Node.js >= {PI_MIN_NODE[0]}.{PI_MIN_NODE[1]}: install it (Debian: apt-get install nodejs)")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    match = re.match(r"v(\d+)\.(\d+)", version)
    if not match or (int(match.group(1)), int(match.group(2))) < PI_MIN_NODE:
        raise UserError(f"node {version or '(unknown version)'} is too old for pi: install Node.js >= "
                        f"{PI_MIN_NODE[0]}.{PI_MIN_NODE[1]}")
    return os.path.realpath(node)


@dataclass(frozen=True)
class _Endpoint:
    scheme: str
    host: str
    port: int
    path: str
    model: str


def _endpoint(uri: str) -> _Endpoint:
    if not uri.startswith(("http://", "https://")):
        raise UserError(f"the pi executor needs an OpenAI-compatible server URI such as http://127.0.0.1:8000/v1#model, "
                        f"not '{uri}': start a server (python -m llama_cpp.server, vllm serve) and point {setting('model')} at it")
    parts = urlsplit(uri)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    model = parts.fragment
    if not model:
        from veriscale.models.openai_compat import OpenAICompatModel

        base = f"{parts.scheme}://{parts.netloc}{parts.path}"
        model = OpenAICompatModel(base).model_id()
    return _Endpoint(parts.scheme, parts.hostname or "", port, parts.path.rstrip("/") or "/v1", model)


#: The largest token count one usage field may report (larger: not counted).
MAX_TOKEN_COUNT = 10**12


def _pi_event(line: str) -> dict[str, Any] | None:
    """One line of pi's ``--mode json`` stdout as an event object; None for anything else.

    The session writes this stream, so it is read like any untrusted JSON: depth and number
    length bounded (``veriscale.data.reader.parse_json``), and only objects are events.
    """
    if not line.strip():
        return None
    try:
        event = parse_json(line, "a pi output line")
    except (json.JSONDecodeError, BadInput):
        return None
    return event if isinstance(event, dict) else None


def _token_count(value: Any) -> int:
    """A usage count as pi reports it: a whole number in range, else 0 (never an exception)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not (value == value and abs(value) < MAX_TOKEN_COUNT):
        return 0
    count = int(value)
    return count if 0 <= count <= MAX_TOKEN_COUNT else 0


class PiExecutor:
    """Runs a session with the ``pi`` coding agent (npm ``@mariozechner/pi-coding-agent``) in the jail."""

    name = "pi"

    def __init__(self, cli_js: Path | None = None, store: Store | None = None) -> None:
        self.store = store
        self.cli_js = resolved(cli_js, "pi CLI script") if cli_js else find_pi()
        self.node = check_node()
        # .../node_modules/@mariozechner/pi-coding-agent/dist/cli.js -> .../node_modules
        self.node_modules = self.cli_js.parents[3]
        # a node outside the system folders (nvm, a tarball) must be visible inside the jail
        prefix = Path(self.node).parents[1]
        self.extra_visible = [] if str(prefix).startswith(("/usr", "/bin", "/lib")) or prefix == Path("/") else [prefix]

    def _recorder(self, session: SessionSpec):
        """A tap factory that records each request pi sends through the relay (None without a store)."""
        if self.store is None:
            return None
        from veriscale.harness.jail.relay_record import RelayRecorder

        return RelayRecorder(self.store, run_id=session.store_run_id, model=session.model_uri, label=session.phase).tap

    def _models_json(self, session: SessionSpec, endpoint: _Endpoint, base_url: str) -> Path:
        config_dir = session.transcript_path.parent / f"{session.transcript_path.stem}.pi-config"
        config_dir.mkdir(parents=True, exist_ok=True)
        document = {"providers": {"veriscale": {
            "baseUrl": base_url, "api": "openai-completions",
            # Jailed: the host's relay swaps in the real key. Jail off: nothing is hidden from pi anyway.
            "apiKey": (_auth_key() or "none") if session.no_jail else RELAY_KEY_PLACEHOLDER,
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": endpoint.model, "maxTokens": session.limits.max_tokens_per_call}],
        }}}
        path = config_dir / "models.json"
        path.write_text(json.dumps(document, indent=2), encoding="utf-8")
        return path

    def _invoke(self, session: SessionSpec, prompt: str, *, continue_session: bool, timeout_s: float,
                transcript: Transcript) -> dict[str, Any]:
        endpoint = _endpoint(session.model_uri)
        if not session.no_jail and endpoint.scheme == "https":
            raise UserError(f"the jail forwards plain TCP, so pi cannot reach the HTTPS endpoint {session.model_uri} "
                            f"from inside it: use a local plain-HTTP server or proxy, or turn the jail off ({setting('no_jail')})")
        if session.no_jail:
            base_url = f"{endpoint.scheme}://{endpoint.host}:{endpoint.port}{endpoint.path}"
        else:
            base_url = f"{inside_model_url((endpoint.host, endpoint.port))}{endpoint.path}"
        models_json = self._models_json(session, endpoint, base_url)
        spec = JailSpec(task_dir=session.task_dir, writable_dir=session.output_dir,
                        readonly_extra=[*session.visible_dirs, self.node_modules, *self.extra_visible, models_json.parent],
                        model_endpoint=None if session.no_jail else (endpoint.host, endpoint.port),
                        env={"PI_OFFLINE": "1", "PI_TELEMETRY": "0", "PI_SKIP_VERSION_CHECK": "1"},
                        no_jail=session.no_jail, limits=session.jail_limits, model_headers=_auth_headers(),
                        model_tap=self._recorder(session), model_policy=RelayPolicy.for_api(endpoint.path, endpoint.model,
                                                                           max_tokens=session.limits.max_tokens_per_call))
        pi_args = [str(self.cli_js), "--provider", "veriscale", "--model", endpoint.model, "--mode", "json", "-p",
                   "--session-dir", str(session.output_dir / PI_SESSION_DIR), "--no-extensions", "--no-skills",
                   "--no-context-files", "--no-prompt-templates", "--no-themes", "--offline",
                   "--tools", PI_TOOLS, "--system-prompt", session.system_prompt]
        if continue_session:
            pi_args.append("--continue")
        pi_args.append(prompt)
        # pi writes auth/settings into its agent folder: give it a fresh private one per call.
        script = ('d=$(mktemp -d) && cp "$0" "$d/models.json" && PI_CODING_AGENT_DIR="$d" "$1" "${@:2}"; '
                  'rc=$?; rm -rf "$d"; exit $rc')
        argv = ["/bin/bash", "-c", script, str(models_json), self.node, *pi_args]
        transcript.write("note", text=f"pi call: continue={continue_session} jail={'off' if session.no_jail else 'on'}")
        transcript.write("message", message={"role": "user", "content": prompt})
        result = run_jailed(spec, argv, timeout_s=max(1.0, timeout_s))
        stats = {"calls": 0, "steps": 0, "prompt_tokens": 0, "completion_tokens": 0, "timed_out": result.timed_out,
                 "returncode": result.returncode, "bad_lines": 0}
        for line in result.stdout.splitlines():
            event = _pi_event(line)
            if event is None:
                stats["bad_lines"] += 1
                continue
            kind = event.get("type")
            if kind == "message_update":
                continue  # streaming deltas: the full message follows in message_end
            transcript.write("pi_event", event=event)
            message = event.get("message")
            if kind == "message_end" and isinstance(message, dict) and message.get("role") == "assistant":
                usage = message.get("usage") if isinstance(message.get("usage"), dict) else {}
                stats["calls"] += 1
                stats["prompt_tokens"] += _token_count(usage.get("input"))
                stats["completion_tokens"] += _token_count(usage.get("output"))
                transcript.write("message", message={"role": "assistant", "content": message.get("content")})
            elif kind == "turn_end" and event.get("toolResults"):
                stats["steps"] += 1
        if stats["bad_lines"]:
            transcript.write("note", text=f"pi stdout: {stats['bad_lines']} line(s) were not JSON events within the "
                                          f"limits (depth {MAX_JSON_DEPTH}, numbers of {MAX_NUMBER_CHARS} characters) "
                                          "and were skipped")
        if result.stderr.strip():
            transcript.write("note", text="pi stderr: " + result.stderr[-4000:])
        return stats

    def run_session(self, session: SessionSpec) -> SessionResult:
        transcript = Transcript(session.transcript_path)
        started = time.monotonic()
        deadline = started + session.limits.wall_clock_s
        totals = {"calls": 0, "steps": 0, "prompt_tokens": 0, "completion_tokens": 0}
        nudged, reason = False, ""

        def problem() -> str | None:
            if session.record_path is None:
                return None
            if not session.record_path.is_file():
                return f"The record file '{session.record_path}' does not exist."
            return session.record_check(session.record_path) if session.record_check else None

        prompt, continuing = session.user_prompt, session.continue_session
        status = "failed"
        while True:
            stats = self._invoke(session, prompt, continue_session=continuing,  # the hand-back inside the deadline
                                 timeout_s=deadline - time.monotonic() - HARVEST_GRACE_S, transcript=transcript)
            for key in totals:
                totals[key] += stats[key]
            issue = problem()
            if stats["timed_out"]:
                status = "completed" if issue is None else "failed"
                reason = f"pi hit the time limit ({session.limits.wall_clock_s:g} s)" + ("" if issue is None else f": {issue}")
                break
            if issue is None:
                status, reason = "completed", f"pi exited with {stats['returncode']}" + (" with its record written" if session.record_path else "")
                break
            if nudged or deadline - time.monotonic() < 5:
                reason = f"ended without a valid record{' after one nudge' if nudged else ''}: {issue}"
                break
            nudged = True
            transcript.write("note", text=f"nudge: {issue}")
            prompt, continuing = nudge_text(issue, session.record_path), True
        outcome = SessionResult(
            phase=session.phase, executor=self.name, status=status, reason=reason, nudged=nudged,
            wall_s=round(time.monotonic() - started, 3),
            tokens_reported=(totals["prompt_tokens"] + totals["completion_tokens"]) > 0 or totals["calls"] == 0,
            record_path=str(session.record_path) if session.record_path else None,
            transcript_path=str(session.transcript_path), **totals)
        transcript.write("end", outcome=outcome.to_dict())
        return outcome


EXECUTORS = {"builtin": BuiltinExecutor, "pi": PiExecutor}


def make_executor(name: str, backend: ModelBackend | None = None, store: Store | None = None) -> Executor:
    """The executor called ``name`` (``builtin`` or ``pi``)."""
    if name == "builtin":
        return BuiltinExecutor(backend, store)
    if name == "pi":
        return PiExecutor(store=store)
    raise UserError(f"unknown executor '{name}': use one of {', '.join(EXECUTORS)}")
