"""OpenAI-style chat transcripts: a list of ``{role, content, tool_calls}`` messages.

Accepted shapes (JSON file, or JSONL with one conversation per line)::

    [{"role": "user", "content": "Sort numbers.txt"}, {"role": "assistant", "content": "Done."}]
    {"id": "run-3", "reward": 1, "messages": [...]}

A JSONL file whose lines are single messages is read as one conversation. Tool results
(``role: tool``) become the observation of the assistant step that called them.

    detect(record) -> bool
    load(record, source="chats.jsonl:2") -> [Candidate]
"""

from __future__ import annotations

from typing import Any

from veriscale.data.importers._chat import chat_to_conversation
from veriscale.data.importers._text import task_from_prompt
from veriscale.data.model import Candidate, Task, Trajectory
from veriscale.errors import UserError

NAME = "openai-messages"
DESCRIPTION = "OpenAI chat messages JSON/JSONL ([{role, content, tool_calls}] or {messages: [...]})"

_LABEL_KEYS = ("reward", "label", "score", "resolved", "correct", "success")


def _is_message(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("role"), str) and (
        "content" in obj or "tool_calls" in obj
    )


def detect(obj: Any) -> bool:
    """True for a message list, a ``{"messages": [...]}`` record, or one message (JSONL lines)."""
    if isinstance(obj, list):
        return bool(obj) and all(_is_message(m) for m in obj[:5])
    if isinstance(obj, dict) and isinstance(obj.get("messages"), list):
        return all(_is_message(m) for m in obj["messages"][:5])
    return _is_message(obj)


def merge_records(records: list[Any]) -> list[Any]:
    """A JSONL of single messages is one conversation; anything else stays one record a line."""
    if records and all(_is_message(r) for r in records):
        return [list(records)]
    return records


def load(obj: Any, source: str = "") -> list[Candidate]:
    """One candidate per conversation; leading system/user messages form the task."""
    if not detect(obj):
        raise UserError(f"{source or 'record'} is not a chat-messages record: check its format")
    record: dict[str, Any] = obj if isinstance(obj, dict) and "messages" in obj else {}
    messages = record.get("messages", obj if isinstance(obj, list) else [obj])
    conv = chat_to_conversation(messages)
    if not conv.steps and not conv.prompt:
        raise UserError(f"{source or 'record'} has no messages: give at least one message")
    task_id = str(record.get("task_id") or record.get("task_name") or "")
    task = None
    if conv.prompt or task_id:
        task = Task(
            text=task_from_prompt(conv.prompt) if conv.prompt else f"Task '{task_id}'",
            id=task_id,
            metadata={"prompt": conv.prompt, **({"system": conv.system} if conv.system else {})},
        )
    labels = {k: record[k] for k in _LABEL_KEYS if k in record and record[k] is not None}
    metadata = {k: record[k] for k in ("model", "metadata") if k in record}
    return [
        Candidate(
            id=str(record.get("id") or record.get("run_id") or source),
            text=conv.final_output,
            trajectory=Trajectory(steps=conv.steps, final_output=conv.final_output),
            labels=labels,
            source=source,
            task=task,
            metadata=metadata,
        )
    ]
