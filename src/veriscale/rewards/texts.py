"""Trainer inputs as the text the verifier reads: plain strings or chat messages.

    prompt_text("Q: 2+2?", 0)                                         # 'Q: 2+2?'
    prompt_text([{"role": "user", "content": "Q: 2+2?"}], 0)          # 'user: Q: 2+2?'
    completion_text([{"role": "assistant", "content": "4"}], 0)       # '4'
    completion_text(None, 3)                                          # None: nothing to judge
    with_reference("Q: 2+2?", "4")                                     # the task with its reference

Content may be a string or a list of parts (``{"type": "text", "text": ...}``); a part that is
not text reads as ``[image]`` or ``[<type>]``. Tool calls read as ``tool call: name(arguments)``.
Anything else is refused with a UserError naming the item.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from veriscale.errors import UserError


def content_text(content: Any, where: str) -> str:
    """The text of one message's ``content``: a string, or the text of its parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, Mapping):
                parts.append(f"[{part.get('type', 'part')}]")
            else:
                raise UserError(f"{where} has a content part of type {type(part).__name__}: "
                                "give text or {'type': 'text', 'text': ...} parts")
        return "\n".join(parts)
    raise UserError(f"{where} has content of type {type(content).__name__}: give a string or a list of parts")


def _tool_calls(message: Mapping[str, Any]) -> list[str]:
    calls = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function", call) if isinstance(call, Mapping) else {}
        args = fn.get("arguments", "")
        args = args if isinstance(args, str) else json.dumps(args, sort_keys=True)
        calls.append(f"tool call: {fn.get('name', '?')}({args})")
    return calls


def _messages(value: list[Any], where: str) -> list[Mapping[str, Any]]:
    for i, message in enumerate(value):
        if not isinstance(message, Mapping) or "role" not in message:
            raise UserError(f"{where} item {i} is not a chat message: give {{'role': ..., 'content': ...}} dicts")
    return value


def prompt_text(prompt: Any, index: int) -> str:
    """A prompt as the task text: a string as it is, messages as ``role: content`` paragraphs."""
    where = f"prompt {index}"
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        lines = []
        for message in _messages(prompt, where):
            body = "\n".join(filter(None, [content_text(message.get("content"), where), *_tool_calls(message)]))
            lines.append(f"{message['role']}: {body}")
        return "\n\n".join(lines)
    raise UserError(f"{where} is {type(prompt).__name__}: give a string or a list of chat messages")


def completion_text(completion: Any, index: int) -> str | None:
    """A completion as the response text; None (nothing to judge) for a missing completion."""
    where = f"completion {index}"
    if completion is None or isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        texts = []
        for message in _messages(completion, where):
            texts += [content_text(message.get("content"), where), *_tool_calls(message)]
        return "\n".join(t for t in texts if t)
    raise UserError(f"{where} is {type(completion).__name__}: give a string or a list of chat messages")


def with_reference(task: str, reference: Any) -> str:
    """The task followed by a reference answer from the dataset (shown to the judge as such)."""
    if reference is None or (isinstance(reference, str) and not reference.strip()):
        return task
    text = reference if isinstance(reference, str) else json.dumps(reference, sort_keys=True, default=str)
    return f"{task}\n\nReference answer (from the dataset; judge the response against it):\n{text}"


def column_values(columns: Mapping[str, Any], name: str, n: int) -> list[Any]:
    """Dataset column ``name`` with one value per completion, or a UserError saying what is wrong."""
    if name not in columns:
        have = ", ".join(sorted(columns)) or "none"
        raise UserError(f"the reward needs dataset column '{name}', but the batch has columns: {have}; "
                        f"add '{name}' to the dataset or set reference_column to one it has")
    values = columns[name]
    if not isinstance(values, (list, tuple)) or len(values) != n:
        size = len(values) if isinstance(values, (list, tuple)) else type(values).__name__
        raise UserError(f"dataset column '{name}' has {size} values for {n} completions: give one per completion")
    return list(values)
