"""The built-in agent: a tool-calling loop over any chat backend, with limits and a transcript.

One :class:`AgentSession` drives one conversation. Each step asks the backend for the next
message; tool calls are run through the session's :class:`~veriscale.harness.sessions.tools.ToolBox`
and their results fed back; the session ends when the model stops calling tools. A session
that ends without its required record file gets exactly one nudge, then fails::

    session = AgentSession(backend, toolbox, Transcript(Path("resolve.jsonl")), AgentLimits(max_steps=20))
    outcome = session.run(system_prompt, user_prompt, record=Path(".../ledger.json"), check=validate_fn)
    outcome.status, outcome.reason, outcome.calls, outcome.prompt_tokens

``continue_with(user_prompt, record=...)`` adds a turn to the same conversation (delivery
continues adjudication); :meth:`AgentSession.resume` rebuilds a session from its transcript.

Small models often write a tool call as JSON in plain text instead of the API's ``tool_calls``.
:func:`tool_calls_from_content` recovers such calls (``{"name": ..., "arguments": {...}}``,
optionally in a code fence or ``<tool_call>`` tags); the transcript marks every recovered call.

Transcript format (JSONL, one event a line, each with ``ts`` in Unix seconds and ``type``):
``message`` (an OpenAI chat message, in conversation order), ``call`` (one model call: usage,
finish_reason, latency_s, recovered_from_content), ``tool`` (name, arguments, is_error,
duration_s), ``note`` (text), ``end`` (the outcome).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veriscale.errors import ModelCallError, UserError, worded
from veriscale.harness.sessions.result import SessionOutcome
from veriscale.harness.sessions.tools import ToolBox
from veriscale.models.base import ChatResponse, ModelBackend
from veriscale.models.cancel import Stopped, current_stop, in_this_context, on_stop, stopped

#: how long a stopped session waits for its cancelled model call to be recorded
STOP_GRACE_S = 10.0

#: ``check(record_path) -> None`` when the record is acceptable, else the error to show the model.
RecordCheck = Callable[[Path], "str | None"]

NUDGE = (
    "You stopped without a valid record. {problem} Write it now with the write tool to '{record}' "
    "and then stop. This is the only reminder: a session without its record is recorded as failed."
)


def nudge_text(problem: str, record: Path | None) -> str:
    """The one reminder a session gets when it stops without a valid record."""
    problem = problem.strip()
    if problem and problem[-1] not in ".!?":
        problem += "."
    return NUDGE.format(problem=problem, record=record)


@dataclass(frozen=True)
class AgentLimits:
    """Caps on one session: model steps, total tokens, wall-clock seconds, tokens per reply."""

    max_steps: int = 30
    max_tokens: int = 200_000
    wall_clock_s: float = 900.0
    max_tokens_per_call: int = 2048
    temperature: float = 0.0

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_tokens", "wall_clock_s", "max_tokens_per_call"):
            value = getattr(self, name)
            if not value > 0:
                raise UserError(f"session limit {name}={value!r} is not positive: give a number above 0")


class Transcript:
    """Append-only JSONL log of one session; safe to share between threads."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"ts": round(time.time(), 3), "type": kind, **fields}, ensure_ascii=False, default=str)
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far, rebuilt from the ``message`` events."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                event = json.loads(line)
                if event.get("type") == "message":
                    out.append(event["message"])
        return out


# --- tool calls written as plain text ---------------------------------------------------------

_FENCE = re.compile(r"```(?:json|tool_call)?\s*(.*?)```", re.S)
_TAG = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


def _json_objects(text: str) -> list[Any]:
    """Every top-level JSON value that starts with '{' or '[' in ``text``, in order."""
    decoder = json.JSONDecoder()
    found, index = [], 0
    while True:
        starts = [i for i in (text.find("{", index), text.find("[", index)) if i >= 0]
        if not starts:
            return found
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            index = start + 1
            continue
        found.append(value)
        index = end


def tool_calls_from_content(content: str, tool_names: set[str]) -> list[dict[str, Any]]:
    """Tool calls a model wrote as JSON text, in OpenAI ``tool_calls`` shape (ids ``text-N``).

    Accepts ``{"name": n, "arguments": {...}}`` (also ``parameters``/``args``, arguments as a
    JSON string, ``{"function": {...}}`` wrappers and lists of calls); only known tool names.
    """
    if not content or "{" not in content:
        return []
    chunks = _TAG.findall(content) + _FENCE.findall(content) or [content]
    calls: list[dict[str, Any]] = []
    for chunk in chunks:
        for value in _json_objects(chunk):
            for item in value if isinstance(value, list) else [value]:
                if not isinstance(item, dict):
                    continue
                if isinstance(item.get("function"), dict):
                    item = item["function"]
                name = item.get("name") or item.get("tool")
                args = next((item[k] for k in ("arguments", "parameters", "args") if k in item), {})
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except json.JSONDecodeError:
                        continue
                if name in tool_names and isinstance(args, dict):
                    calls.append({
                        "id": f"text-{len(calls) + 1}", "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
                    })
    return calls


def _parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(raw, dict):
        return raw, None
    if raw in (None, ""):
        return {}, None
    try:
        value = json.loads(raw)
    except (TypeError, json.JSONDecodeError) as exc:
        return None, f"error: the arguments are not valid JSON ({exc}); send a JSON object"
    if not isinstance(value, dict):
        return None, "error: the arguments must be a JSON object"
    return value, None


# --- the loop ---------------------------------------------------------------------------------


Chat = Callable[..., ChatResponse]


def _chat_within(chat: Chat, timeout_s: float, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
    """``chat(messages, **kwargs)`` bounded by ``timeout_s``; raises ``TimeoutError`` when the reply is late.

    The late call is left to finish (or time out) in a daemon thread: an HTTP request cannot be
    withdrawn from the server, but the session stops waiting for it. Under a stop flag
    (:func:`veriscale.models.cancel.current_stop`; ``harness run`` sets one for Ctrl-C and SIGTERM)
    a set flag ends the wait at once: the call, which runs under the same flag, is cancelled by
    the gateway and recorded ``cancelled``; this waits up to :data:`STOP_GRACE_S` for that record
    and raises :class:`~veriscale.models.cancel.Stopped`.
    """
    box: dict[str, Any] = {}
    done = threading.Event()
    stop = current_stop()

    def target() -> None:
        try:
            box["response"] = chat(list(messages), **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=in_this_context(target), name="model-call", daemon=True)
    undo = on_stop(stop, done.set)
    try:
        worker.start()
        done.wait(max(0.0, timeout_s))
    finally:
        undo()
    if stop is not None and stop.is_set() and "response" not in box:
        worker.join(STOP_GRACE_S)
        raise Stopped()
    if not done.is_set():
        raise TimeoutError
    if "error" in box:
        raise box["error"]
    return box["response"]


def assistant_tool_message(content: str | None, tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant turn that carries tool calls. Content is a string, never null: servers
    such as llama.cpp's reject ``"content": null`` on the next request."""
    return {"role": "assistant", "content": content or "", "tool_calls": tool_calls}


class AgentSession:
    """One tool-calling conversation with a backend, bounded by :class:`AgentLimits`."""

    def __init__(self, backend: ModelBackend, toolbox: ToolBox, transcript: Transcript,
                 limits: AgentLimits | None = None, messages: list[dict[str, Any]] | None = None,
                 chat: Chat | None = None) -> None:
        self.backend = backend
        self.chat = chat or backend.chat  # the gateway's cached chat, when the executor gives one
        self.toolbox = toolbox
        self.transcript = transcript
        self.limits = limits or AgentLimits()
        self.messages: list[dict[str, Any]] = list(messages or [])

    @classmethod
    def resume(cls, backend: ModelBackend, toolbox: ToolBox, transcript: Transcript,
               limits: AgentLimits | None = None, chat: Chat | None = None) -> "AgentSession":
        """A session that continues the conversation saved in ``transcript``."""
        return cls(backend, toolbox, transcript, limits, messages=transcript.messages(), chat=chat)

    def _add(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.transcript.write("message", message=message)

    def run(self, system_prompt: str, user_prompt: str, *, record: Path | None = None,
            check: RecordCheck | None = None) -> SessionOutcome:
        """Start the conversation and run it to its end."""
        if self.messages:
            raise RuntimeError("AgentSession.run called on a session that already has messages; use continue_with")
        self._add({"role": "system", "content": system_prompt})
        return self.continue_with(user_prompt, record=record, check=check)

    def continue_with(self, user_prompt: str, *, record: Path | None = None,
                      check: RecordCheck | None = None) -> SessionOutcome:
        """Add a user turn and run until the model stops, a limit is hit, or the nudge fails."""
        self._add({"role": "user", "content": user_prompt})
        outcome = self._loop(record, check)
        self.transcript.write("end", outcome=outcome.to_dict())
        return outcome

    def _record_problem(self, record: Path | None, check: RecordCheck | None) -> str | None:
        if record is None:
            return None
        if not record.is_file():
            return f"The record file '{record}' does not exist."
        if check is not None:
            return check(record)
        return None

    def _loop(self, record: Path | None, check: RecordCheck | None) -> SessionOutcome:
        limits = self.limits
        started = time.monotonic()
        self.toolbox.deadline = started + limits.wall_clock_s
        out = SessionOutcome(status="failed", reason="", record_path=str(record) if record else None)
        names = set(self.toolbox.enabled)

        def finish(status: str, reason: str) -> SessionOutcome:
            out.status, out.reason = status, reason
            out.wall_s = round(time.monotonic() - started, 3)
            return out

        def limit_end(what: str) -> SessionOutcome:
            problem = self._record_problem(record, check)
            if problem is None:
                return finish("completed", f"stopped at the {what} with its record written")
            return finish("failed", f"hit the {what} without a valid record: {problem}")

        while True:
            stopped(current_stop())  # a stopped run (Ctrl-C, SIGTERM) ends the session between steps
            if out.steps >= limits.max_steps:
                return limit_end(f"step limit ({limits.max_steps})")
            if out.prompt_tokens + out.completion_tokens >= limits.max_tokens:
                return limit_end(f"token limit ({limits.max_tokens})")
            if time.monotonic() - started >= limits.wall_clock_s:
                return limit_end(f"time limit ({limits.wall_clock_s:g} s)")
            call_started = time.monotonic()
            remaining = limits.wall_clock_s - (call_started - started)
            try:
                response = _chat_within(self.chat, remaining, self.messages, tools=self.toolbox.schemas(),
                                        max_tokens=limits.max_tokens_per_call, temperature=limits.temperature)
            except ModelCallError as exc:
                self.transcript.write("note", text=f"model call failed: {exc}")
                return finish("failed", worded(f"model call failed: {exc.template}"))
            except Stopped:
                self.transcript.write("note", text="the run was stopped while waiting for the model; the call was cancelled")
                raise
            except TimeoutError:
                self.transcript.write("note", text="time limit reached while waiting for the model")
                return limit_end(f"time limit ({limits.wall_clock_s:g} s) during a model call")
            out.calls += 1
            out.prompt_tokens += response.prompt_tokens
            out.completion_tokens += response.completion_tokens
            tool_calls = list(response.tool_calls or [])
            recovered = False
            if not tool_calls:
                tool_calls = tool_calls_from_content(response.content, names)
                recovered = bool(tool_calls)
                if recovered:
                    out.recovered_calls += len(tool_calls)
            self.transcript.write(
                "call", usage={"prompt_tokens": response.prompt_tokens, "completion_tokens": response.completion_tokens},
                finish_reason=response.finish_reason, latency_s=round(time.monotonic() - call_started, 3),
                tool_calls=len(tool_calls), recovered_from_content=recovered)
            if recovered:
                self.transcript.write("note", text=f"{len(tool_calls)} tool call(s) recovered from plain message content")
            if not tool_calls:
                self._add({"role": "assistant", "content": response.content or ""})
                problem = self._record_problem(record, check)
                if problem is None:
                    return finish("completed", "the model finished" + (" with its record written" if record else ""))
                if out.nudged:
                    return finish("failed", f"ended without a valid record after one nudge: {problem}")
                out.nudged = True
                self.transcript.write("note", text=f"nudge: {problem}")
                self._add({"role": "user", "content": nudge_text(problem, record)})
                continue
            out.steps += 1
            self._add(assistant_tool_message(response.content, tool_calls))
            for call in tool_calls:
                self._run_tool(call)

    def _run_tool(self, call: dict[str, Any]) -> None:
        function = call.get("function") or {}
        name = str(function.get("name") or "").strip().rstrip(":")
        arguments, error = _parse_arguments(function.get("arguments"))
        if error is None:
            result = self.toolbox.call(name, arguments or {})
            text, is_error, duration = result.text, result.is_error, result.duration_s
        else:
            text, is_error, duration = error, True, 0.0
        self.transcript.write("tool", name=name, arguments=arguments if arguments is not None else function.get("arguments"),
                              is_error=is_error, duration_s=round(duration, 3))
        self._add({"role": "tool", "tool_call_id": str(call.get("id") or ""), "name": name, "content": text})

