"""The one shape every front API is translated into and out of: OpenAI Chat Completions.

A :class:`Conversation` is what the agent asked (messages with tool calls and tool results,
tool definitions, limits); a :class:`Reply` is one candidate's answer (text and/or tool calls).
The three fronts (``openai_chat``, ``responses``, ``anthropic``) only convert to and from
these, so fan-out, agreement and picking know one format::

    conv = Conversation(messages=[{"role": "user", "content": "hi"}], tools=[], max_tokens=256)
    reply = Reply(text="", tool_calls=[tool_call("call_1", "bash", {"cmd": "ls"})])
    reply.finish_reason       # "tool_calls"
    transcript(conv)          # the conversation as text, for the judge
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any


class ApiError(Exception):
    """A request the front refuses, with its HTTP status and error type."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param


@dataclass
class Conversation:
    messages: list[dict[str, Any]]  # OpenAI chat messages (system/user/assistant with tool_calls/tool)
    tools: list[dict[str, Any]] = field(default_factory=list)  # [{"type": "function", "function": {...}}]
    max_tokens: int | None = None
    temperature: float | None = None
    stream: bool = False
    model: str = ""  # the model name the client asked for, echoed back


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"id", "type", "function": {name, arguments}}]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    truncated: bool = False  # the upstream stopped at max_tokens

    @property
    def finish_reason(self) -> str:
        if self.tool_calls:
            return "tool_calls"
        return "length" if self.truncated else "stop"

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "tool_calls": self.tool_calls, "finish_reason": self.finish_reason,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


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
    """Chat message content (a string, or parts) as plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, dict):
            parts.append(str(part.get("text") or part.get("content") or ""))
        else:
            parts.append(str(part))
    return "\n".join(p for p in parts if p)


def reply_text(reply: Reply) -> str:
    """One candidate as the judge reads it: its words, then each tool call it would make."""
    lines = [reply.text.strip()] if reply.text.strip() else []
    for call in reply.tool_calls:
        fn = call.get("function", {})
        lines.append(f"[tool call] {fn.get('name')}({fn.get('arguments') or ''})")
    return "\n".join(lines) or "(empty reply)"


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
