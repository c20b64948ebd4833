"""Test double: a ModelBackend whose ``chat`` replays scripted replies, one script per phase.

The protocol runs resolver and challenger at the same time, so one global script would interleave
at random; instead each request is routed to a script by the last ``Phase: <name>`` marker in its
messages (the protocol's prompts carry one), and each script is replayed in order::

    chat = ScriptedChat({
        "resolve": [call("write", path="ledger.json", content=json.dumps(ledger)), say("done")],
        "challenge": [say("I will not write anything")],
    })
    chat.requests["resolve"]    # every message list the resolver sent, for assertions

A step is a ``ChatResponse`` (built with :func:`call`, :func:`calls` or :func:`say`) or a
callable ``messages -> ChatResponse``. A script that runs out answers with plain text, like a
model that has nothing more to say.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any, Union

from veriscale.models.base import ChatResponse

Step = Union[ChatResponse, Callable[[list[dict[str, Any]]], ChatResponse]]
_MARKER = re.compile(r"^Phase: (\w+)", re.M)


def call(name: str, **arguments: Any) -> ChatResponse:
    """A reply with one tool call."""
    return calls((name, arguments))


def calls(*pairs: tuple[str, dict[str, Any]]) -> ChatResponse:
    """A reply with several tool calls."""
    return ChatResponse(
        content="",
        tool_calls=[{"id": f"call-{i}", "type": "function",
                     "function": {"name": name, "arguments": json.dumps(args)}} for i, (name, args) in enumerate(pairs)],
        prompt_tokens=100, completion_tokens=20, finish_reason="tool_calls")


def say(text: str) -> ChatResponse:
    """A plain-text reply (no tool call): the model stops."""
    return ChatResponse(content=text, prompt_tokens=100, completion_tokens=10, finish_reason="stop")


def phase_of(messages: list[dict[str, Any]]) -> str:
    """The last ``Phase: <name>`` marker in system or user messages."""
    found = "unknown"
    for message in messages:
        if message.get("role") in ("system", "user"):
            for match in _MARKER.findall(message.get("content") or ""):
                found = match
    return found


class ScriptedChat:
    """A scripted stand-in for a chat model (the ModelBackend protocol); it never scores."""

    uri = "scripted"
    display_name = "scripted chat (test double)"
    is_embedded = False

    def __init__(self, scripts: dict[str, list[Step]]) -> None:
        self.scripts = {phase: list(steps) for phase, steps in scripts.items()}
        self.requests: dict[str, list[list[dict[str, Any]]]] = {}
        self.tools_seen: list[list[str]] = []
        self._lock = threading.Lock()

    def fingerprint(self) -> str:
        return "scripted"

    def score(self, request):  # pragma: no cover - the harness never scores
        raise NotImplementedError("ScriptedChat only chats")

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def context_size(self) -> int | None:
        return None

    def single_token_labels(self, labels):
        return []

    def chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
             max_tokens: int = 512, temperature: float = 0.0) -> ChatResponse:
        phase = phase_of(messages)
        with self._lock:
            self.requests.setdefault(phase, []).append(json.loads(json.dumps(messages)))
            self.tools_seen.append([t["function"]["name"] for t in tools or []])
            script = self.scripts.get(phase, [])
            step = script.pop(0) if script else say("(script finished)")
        return step(messages) if callable(step) else step
