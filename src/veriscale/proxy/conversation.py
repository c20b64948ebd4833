"""The one shape every front API is translated into and out of: OpenAI Chat Completions.

A :class:`Conversation` is what the agent asked (messages with tool calls and tool results,
tool definitions, limits); a :class:`Reply` is one candidate's answer (text and/or tool calls).
The three fronts (``openai_chat``, ``responses``, ``anthropic``) only convert to and from
these, so fan-out, agreement and picking know one format::

    conv = Conversation(messages=[{"role": "user", "content": "hi"}], tools=[], max_tokens=256)
    reply = Reply(text="", tool_calls=[tool_call("call_1", "bash", {"cmd": "ls"})])
    reply.finish_reason       # "tool_calls"
    transcript(conv)          # the conversation as text, for the judge

Sampling and tool fields each front takes (``stop``, ``top_p``, ``tool_choice``, ...) are kept
in ``conv.options`` under their Chat Completions names, for every candidate call::

    Conversation(messages=[...], options={"stop": ["3"], "top_p": 0.9}, seed=7)
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any


class ApiError(Exception):
    """A request the front refuses, with its HTTP status and error type."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.code = status, message, kind, param, code


def unknown_model(name: str, known: list[str]) -> ApiError:
    """The not-found error for a model name the proxy has no pool for (each front spells it its way)."""
    return ApiError(404, f"the model '{name}' does not exist on this proxy: use one of {', '.join(known)} "
                         "(GET /v1/models lists them; [proxy.aliases] in the config file adds names)",
                    kind="not_found_error", param="model", code="model_not_found")


@dataclass
class Conversation:
    messages: list[dict[str, Any]]  # OpenAI chat messages (system/user/assistant with tool_calls/tool)
    tools: list[dict[str, Any]] = field(default_factory=list)  # [{"type": "function", "function": {...}}]
    max_tokens: int | None = None
    temperature: float | None = None
    stream: bool = False
    model: str = ""  # the model name the client asked for, echoed back
    #: upstream chat parameters the client set, by their Chat Completions names: stop, top_p, top_k,
    #: presence_penalty, frequency_penalty, tool_choice, response_format (veriscale.proxy.fan_out.OPTIONS)
    options: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None  # the client's seed: candidate seeds derive from it, and only then are samples cached
    max_tool_calls: int | None = None  # parallel_tool_calls false: 1; Responses' max_tool_calls
    option_fields: dict[str, str] = field(default_factory=dict)  # option -> the client's name, where it differs
    echo: dict[str, Any] = field(default_factory=dict)  # request fields the reply repeats (Responses: tools, top_p, ...)


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"id", "type", "function": {name, arguments}}]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    truncated: bool = False  # the upstream stopped at max_tokens
    stop_sequence: str | None = None  # the request's stop sequence the upstream says it stopped on

    @property
    def finish_reason(self) -> str:
        if self.tool_calls:
            return "tool_calls"
        return "length" if self.truncated else "stop"

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "tool_calls": self.tool_calls, "finish_reason": self.finish_reason,
                "stop_sequence": self.stop_sequence, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens}


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """One tool call in the chat shape (``arguments`` a dict or its JSON text)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def arguments_of(call: dict[str, Any]) -> Any:
    """A tool call's arguments parsed (the text itself when it is not JSON)."""
    text = call.get("function", {}).get("arguments") or ""
    try:
        return json.loads(text) if text else {}
    except json.JSONDecodeError:
        return text


def content_text(content: Any) -> str:
    """Chat message content (a string, or parts) as plain text; anything else is its JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    parts = []
    for part in content:
        if isinstance(part, dict):
            inner = part.get("text") or part.get("content") or ""
            parts.append(inner if isinstance(inner, str) else content_text(inner))
        else:
            parts.append(str(part))
    return "\n".join(p for p in parts if p)


# -- checks the three fronts share: each refusal is an ApiError (400) naming the field -------------
def optional_int(body: dict[str, Any], key: str) -> int | None:
    """``body[key]`` when it is a positive integer (not a bool), None when absent."""
    value = body.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ApiError(400, f"'{key}' must be a positive integer", param=key)
    return value


def optional_temperature(body: dict[str, Any], key: str = "temperature") -> float | None:
    """``body[key]`` when it is a number in [0, 2], None when absent."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 2:
        raise ApiError(400, f"'{key}' must be a number from 0 to 2", param=key)
    return value


def optional_number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    """``body[key]`` when it is a number in [low, high], None when absent."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise ApiError(400, f"'{key}' must be a number from {low:g} to {high:g}", param=key)
    return value


def optional_seed(body: dict[str, Any], key: str = "seed") -> int | None:
    """``body[key]`` when it is an integer (not a bool), None when absent."""
    value = body.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise ApiError(400, f"'{key}' must be an integer", param=key)
    return value


def stop_list(body: dict[str, Any], key: str, most: int) -> list[str] | None:
    """``body[key]`` as a list of 1 to ``most`` non-empty strings (one string is a list of one)."""
    value = body.get(key)
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or len(items) > most or any(not isinstance(v, str) or not v for v in items):
        raise ApiError(400, f"'{key}' must be a non-empty string or an array of up to {most} of them", param=key)
    return items or None


def refuse_fields(body: dict[str, Any], refused: dict[str, Any]) -> None:
    """A 400 naming the first field of ``refused`` (name -> why) that the body sets: a field the proxy
    cannot honour is refused, never dropped. ``why`` may be a callable of the value: None accepts it."""
    for key, why in refused.items():
        value = body.get(key)
        if value is None:
            continue
        reason = why(value) if callable(why) else why
        if reason:
            raise ApiError(400, f"'{key}' is not supported by this proxy: {reason}", param=key)


def function_choice(tools: list[dict[str, Any]], key: str, name: Any) -> dict[str, Any]:
    """The chat ``tool_choice`` that forces the function ``name``, which must be one of ``tools``."""
    names = [t.get("function", {}).get("name") for t in tools]
    if not isinstance(name, str) or name not in names:
        raise ApiError(400, f"'{key}' names the tool {shown_name(name)}, which is not in 'tools': name one of "
                            f"{', '.join(map(str, names)) or '(no tools given)'}", param=key)
    return {"type": "function", "function": {"name": name}}


def shown_name(name: Any) -> str:
    text = str(name)
    return repr(text[:60] + ("…" if len(text) > 60 else ""))


def apply_tool_choice(conv: "Conversation", mode: str | dict[str, Any] | None) -> None:
    """``auto`` (the default) changes nothing; ``none`` sends no tools upstream (so none is called);
    ``required`` and a named function go upstream as the chat ``tool_choice``."""
    if mode is None or mode == "auto":
        return
    if mode == "none":
        conv.tools = []
        return
    if not conv.tools:
        raise ApiError(400, "'tool_choice' asks for a tool call but the request has no 'tools'", param="tool_choice")
    conv.options["tool_choice"] = mode


def optional_bool(body: dict[str, Any], key: str) -> bool:
    """``body[key]`` when it is true or false; absent or null is false."""
    value = body.get(key)
    if value is not None and not isinstance(value, bool):
        raise ApiError(400, f"'{key}' must be true or false", param=key)
    return bool(value)


def model_name(body: dict[str, Any]) -> str:
    """The model the client named (echoed back), or "veriscale"."""
    value = body.get("model")
    if value is not None and not isinstance(value, str):
        raise ApiError(400, "'model' must be a string", param="model")
    return value or "veriscale"


def check_tool_calls(calls: Any, where: str) -> None:
    """Chat tool calls: a list of ``{"id", "type": "function", "function": {"name", "arguments": str}}``."""
    if calls is None:
        return
    ok = isinstance(calls, list) and all(
        isinstance(c, dict) and isinstance(c.get("function"), dict) and isinstance(c["function"].get("name"), str)
        and isinstance(c["function"].get("arguments", ""), str) and isinstance(c.get("id", ""), str) for c in calls)
    if not ok:
        raise ApiError(400, f"{where}.tool_calls must be an array of {{\"id\", \"type\": \"function\", \"function\": "
                            "{\"name\", \"arguments\": \"<JSON text>\"}}", param=f"{where}.tool_calls")


def reply_text(reply: Reply) -> str:
    """One candidate as the judge reads it: its words, then each tool call it would make."""
    lines = [reply.text.strip()] if reply.text.strip() else []
    for call in reply.tool_calls:
        fn = call.get("function", {})
        lines.append(f"[tool call] {fn.get('name')}({fn.get('arguments') or ''})")
    return "\n".join(lines) or "(empty reply)"


def recorded_conversation(conv: Conversation, max_messages: int = 60, max_chars: int = 20_000) -> dict[str, Any]:
    """What a proxied request's run keeps of the conversation, for the dashboard's request page:
    the last ``max_messages`` messages (role, text cut to ``max_chars``, tool calls, the call a
    tool result answers), the tools' names and how many earlier messages were left out::

        recorded_conversation(conv)["messages"][-1]   # {"role": "tool", "content": "...", "tool_call_id": "call_1"}
    """
    kept = conv.messages[-max_messages:]
    messages = []
    for m in kept:
        text = content_text(m.get("content"))
        entry: dict[str, Any] = {"role": m.get("role", "?"),
                                 "content": text if len(text) <= max_chars else text[:max_chars] + " …(cut)"}
        for key in ("tool_calls", "tool_call_id", "name"):
            if m.get(key):
                entry[key] = m[key]
        messages.append(entry)
    return {"messages": messages, "left_out": len(conv.messages) - len(kept),
            "tools": [t.get("function", {}).get("name", "?") for t in conv.tools]}


def transcript(conv: Conversation, max_chars: int = 12_000) -> str:
    """The conversation so far as text (the judge's task), newest part kept when too long."""
    lines = []
    if conv.tools:
        names = ", ".join(t.get("function", {}).get("name", "?") for t in conv.tools)
        lines.append(f"[tools available] {names}")
    for m in conv.messages:
        role = m.get("role", "?")
        text = content_text(m.get("content"))
        if text:
            lines.append(f"[{role}] {text}")
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {})
            lines.append(f"[{role} tool call] {fn.get('name')}({fn.get('arguments') or ''})")
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = "…" + text[-max_chars:]
    return text + "\n\nWhat is the best next reply of the assistant?"
