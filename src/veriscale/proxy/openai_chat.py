"""OpenAI Chat Completions in front: ``POST /v1/chat/completions``, streamed or not.

    conv = parse(body)                    # ApiError(400, ...) when it is not a chat request
    completion(outcome.reply, conv)       # the chat.completion object
    chunks(outcome.reply, conv)           # the chat.completion.chunk SSE lines (text and arguments in pieces), then [DONE]
    error_body(exc)                       # {"error": {"message", "type", "param", "code"}}

Keep-alive while candidates run is an SSE comment line (``: keep-alive``), which SDK stream
decoders skip.
"""

from __future__ import annotations

import time
from typing import Any

from veriscale.proxy.conversation import (ApiError, Conversation, Reply, check_tool_calls, model_name, new_id, optional_bool,
                                          optional_int, optional_temperature)
from veriscale.proxy.streaming import pieces
from veriscale.server.stream import sse

KEEPALIVE = ": keep-alive\n\n"
ROLES = ("system", "developer", "user", "assistant", "tool")


def _check_content(content: Any, where: str) -> None:
    parts_ok = isinstance(content, list) and all(isinstance(p, str) or (isinstance(p, dict) and isinstance(p.get("type"), str))
                                                 for p in content)
    if content is not None and not isinstance(content, str) and not parts_ok:
        raise ApiError(400, f"{where}.content must be a string, an array of content parts or null", param=f"{where}.content")


def parse(body: Any) -> Conversation:
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object with 'model' and 'messages'")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty array of chat messages", param="messages")
    out = []
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise ApiError(400, f"messages[{k}] needs a 'role' of {', '.join(ROLES)}", param=f"messages[{k}].role")
        _check_content(m.get("content"), f"messages[{k}]")
        check_tool_calls(m.get("tool_calls"), f"messages[{k}]")
        if m.get("tool_call_id") is not None and not isinstance(m["tool_call_id"], str):
            raise ApiError(400, f"messages[{k}].tool_call_id must be a string", param=f"messages[{k}].tool_call_id")
        m = dict(m)
        if m["role"] == "developer":
            m["role"] = "system"
        out.append(m)
    tools = body.get("tools") or []
    if not isinstance(tools, list) or any(not isinstance(t, dict) or not isinstance(t.get("function"), dict)
                                          or not isinstance(t["function"].get("name"), str) for t in tools):
        raise ApiError(400, "'tools' must be an array of {\"type\": \"function\", \"function\": {\"name\", ...}}", param="tools")
    max_tokens = optional_int(body, "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object such as {\"include_usage\": true}", param="stream_options")
    return Conversation(messages=out, tools=tools, max_tokens=max_tokens, temperature=optional_temperature(body),
                        stream=optional_bool(body, "stream"), model=model_name(body))


def _usage(reply: Reply) -> dict[str, int]:
    return {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens}


def completion(reply: Reply, conv: Conversation) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    return {"id": new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()), "model": conv.model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}],
            "usage": _usage(reply)}


def chunks(reply: Reply, conv: Conversation, include_usage: bool = False) -> list[str]:
    base = {"id": new_id("chatcmpl-"), "object": "chat.completion.chunk", "created": int(time.time()),
            "model": conv.model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]})

    out = [chunk({"role": "assistant", "content": ""})]
    if reply.text:
        out.extend(chunk({"content": piece}) for piece in pieces(reply.text))
    for k, call in enumerate(reply.tool_calls):
        fn = call["function"]
        out.append(chunk({"tool_calls": [{"index": k, "id": call["id"], "type": "function",
                                          "function": {"name": fn["name"], "arguments": ""}}]}))
        out.extend(chunk({"tool_calls": [{"index": k, "function": {"arguments": piece}}]})
                   for piece in pieces(fn["arguments"]))
    out.append(chunk({}, reply.finish_reason))
    if include_usage:
        out.append(sse({**base, "choices": [], "usage": _usage(reply)}))
    out.append("data: [DONE]\n\n")
    return out


def error_body(message: str, kind: str = "invalid_request_error", param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}
