"""Turn a list of chat messages (OpenAI, Inspect, mini-swe-agent) into a task prompt and steps.

    conv = chat_to_conversation([
        {"role": "system", "content": "You are a coder."},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "", "tool_calls": [...]},
        {"role": "tool", "tool_call_id": "c1", "content": "exit code: 1 ..."},
    ])
    conv.prompt       # "Fix the bug."
    conv.steps[0]     # Step(role="agent", tool_calls=[...], observation="...", exit_code=1)

Messages before the first assistant message form the task (system text apart); tool results
become the observation of the agent step that called them. Given ``images`` (a message content's
images: :func:`veriscale.data.importers._text.content_images`), a message's images go with it: the
task's to ``prompt_images``, a tool result's to the step that called the tool, the rest to their step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from veriscale.data.importers._text import (
    arguments_dict,
    combine_exit_codes,
    content_text,
    exit_code_value,
    parse_exit_code,
)
from veriscale.data.images import ImageRef
from veriscale.data.model import Step

_AGENT_ROLES = {"assistant", "agent", "model", "ai"}
_TOOL_ROLES = {"tool", "function", "ipython", "observation"}
_SYSTEM_ROLES = {"system", "developer"}


@dataclass
class Conversation:
    """A chat split into what the agent was asked and what it then did."""

    system: str = ""
    prompt: str = ""
    steps: list[Step] = field(default_factory=list)
    final_output: str = ""
    prompt_images: list[ImageRef] = field(default_factory=list)


def normalize_tool_call(call: Any) -> dict[str, Any]:
    """One tool call as ``{"name", "arguments", "id"}`` from OpenAI, Inspect or ATIF shapes."""
    if not isinstance(call, dict):
        return {"name": "tool", "arguments": str(call)}
    function = call.get("function")
    if isinstance(function, dict):  # OpenAI: {"function": {"name", "arguments": "<json>"}}
        name = function.get("name", "")
        arguments = function.get("arguments")
    else:  # Inspect: {"function": "bash", "arguments": {...}}; ATIF: function_name/tool_name
        name = function or call.get("function_name") or call.get("tool_name") or call.get("name", "")
        arguments = call.get("arguments", call.get("input"))
    normalized: dict[str, Any] = {"name": str(name or "tool"), "arguments": arguments_dict(arguments)}
    call_id = call.get("id") or call.get("tool_call_id")
    if call_id:
        normalized["id"] = str(call_id)
    return normalized


def _tool_result_text(message: dict[str, Any]) -> str:
    text = content_text(message.get("content"))
    error = message.get("error")
    if isinstance(error, dict) and error.get("message"):
        kind = error.get("type", "error")
        text = f"{text}\n[tool error: {kind}] {error['message']}".strip()
    elif isinstance(error, str) and error:
        text = f"{text}\n[tool error] {error}".strip()
    return text


def chat_to_conversation(
    messages: list[dict[str, Any]],
    *,
    user_is_observation: bool = False,
    parse_agent_text: Callable[[str], list[dict[str, Any]]] | None = None,
    images: Callable[[Any], list[ImageRef]] | None = None,
) -> Conversation:
    """Split chat ``messages`` into system text, task prompt and agent steps.

    ``user_is_observation``: user messages after the first assistant turn carry command output
    (mini-swe-agent) and become the previous step's observation instead of new user steps.
    ``parse_agent_text``: extracts tool calls written inside assistant text (```bash blocks).
    ``images``: a message content's images (none are read without it).
    """
    conv = Conversation()
    system_parts: list[str] = []
    prompt_parts: list[str] = []
    started = False
    observed: dict[int, list[str]] = {}
    codes: dict[int, list[int | None]] = {}

    def attach(index: int, text: str, code: int | None) -> None:
        observed.setdefault(index, []).append(text)
        codes.setdefault(index, []).append(code if code is not None else parse_exit_code(text))

    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", "")).lower()
        text = content_text(message.get("content"))
        seen = images(message.get("content")) if images is not None else []
        if role in _AGENT_ROLES:
            started = True
            calls = [normalize_tool_call(c) for c in as_list(message.get("tool_calls"))]
            if not calls and parse_agent_text is not None:
                calls = parse_agent_text(text)
            conv.steps.append(Step(role="agent", text=text, tool_calls=calls, images=seen))
            if text.strip():
                conv.final_output = text
        elif not started and role in _SYSTEM_ROLES:
            system_parts.append(text)
        elif not started and role == "user":
            prompt_parts.append(text)
            conv.prompt_images.extend(seen)
        elif role in _TOOL_ROLES or (role == "user" and user_is_observation):
            target = _calling_step(conv.steps, message.get("tool_call_id"))
            if target is None:
                conv.steps.append(Step(role="tool", observation=_tool_result_text(message), images=seen))
                continue
            attach(target, _tool_result_text(message), _explicit_exit_code(message))
            conv.steps[target].images.extend(seen)
            if message.get("tool_call_id"):  # tied to its call, for the trajectory viewer
                conv.steps[target].tool_results[str(message["tool_call_id"])] = _tool_result_text(message)
        else:
            conv.steps.append(Step(role=role or "user", text=text, images=seen))

    for index, parts in observed.items():
        conv.steps[index].observation = "\n".join(p for p in parts if p)
        conv.steps[index].exit_code = combine_exit_codes(codes[index])
    conv.system = "\n\n".join(p for p in system_parts if p)
    conv.prompt = "\n\n".join(p for p in prompt_parts if p)
    return conv


def _explicit_exit_code(message: dict[str, Any]) -> int | None:
    for key in ("exit_code", "returncode", "exitCode"):
        value = exit_code_value(message.get(key))
        if value is not None:
            return value
    return None


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else ``[]`` (a record's optional list field of the wrong type)."""
    return value if isinstance(value, list) else []


def _calling_step(steps: list[Step], call_id: Any) -> int | None:
    """Index of the agent step that made tool call ``call_id`` (else the last agent step)."""
    if call_id:
        for index in range(len(steps) - 1, -1, -1):
            if any(c.get("id") == str(call_id) for c in steps[index].tool_calls):
                return index
    for index in range(len(steps) - 1, -1, -1):
        if steps[index].role == "agent":
            return index
    return None
