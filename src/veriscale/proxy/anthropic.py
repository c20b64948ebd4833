"""Anthropic Messages in front (what Claude Code speaks through ``ANTHROPIC_BASE_URL``).

    conv = parse(body)               # system + messages with text / tool_use / tool_result blocks
    message(outcome.reply, conv)     # the message object (text and tool_use blocks, stop_reason)
    opening(conv, mid, input_tokens) + block_events(outcome.reply)   # message_start, ping, content_block_* ... message_stop
    error_body("...", "invalid_request_error")

Translation to the chat shape: ``system`` → a system message; a user turn's ``tool_result``
blocks → ``tool`` messages (before its text); an assistant turn's ``tool_use`` blocks → its
``tool_calls``; tools' ``input_schema`` → ``parameters``. Images and thinking blocks are left
out (a chat upstream gets their place as text). Keep-alive while candidates run is the
``ping`` event Anthropic's own streams send. ``message_start`` goes out once the valid candidate
with the lowest number is back, with its input token count: the one the non-streamed reply and
``message_delta`` give too (``veriscale.proxy.proxied_request``, **Numbers**; pings before it, which the
SDK skips). ``stop_reason`` is "stop_sequence", with the string, only when the upstream said which
of the request's ``stop_sequences`` it stopped on (:func:`stop_of`). Text and ``tool_use`` input
are streamed in pieces (``veriscale.proxy.streaming.pieces``).
"""

from __future__ import annotations

import json
from typing import Any

from veriscale.data.reader import shown
from veriscale.proxy.conversation import (ApiError, Conversation, Reply, apply_tool_choice, arguments_of, function_choice,
                                          model_name, new_id, optional_bool, optional_int, optional_number,
                                          optional_temperature, refuse_fields, stop_list)
from veriscale.proxy.streaming import pieces
from veriscale.server.stream import sse

PING = sse({"type": "ping"}, event="ping")
STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
#: Messages fields that would change the answer but that the proxy cannot honour: refused with a 400.
#: Accepted with no effect on the answer: metadata, service_tier, speed, inference_geo, cache_control,
#: diagnostics, thinking (a chat upstream writes no thinking blocks), context_management and
#: output_config.effort (Claude Code sends several of these); output_config.format is honoured.
REFUSED = {
    "mcp_servers": lambda v: None if v == [] else "a chat upstream cannot reach MCP servers: leave it out",
    "container": "a chat upstream has no code-execution container: leave it out",
}


def _tool_choice(body: dict[str, Any], tools: list[dict[str, Any]]) -> str | dict[str, Any] | None:
    choice = body.get("tool_choice")
    if choice is None:
        return None
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind not in ("auto", "any", "tool", "none"):
        raise ApiError(400, "tool_choice: must be {\"type\": \"auto\"}, {\"type\": \"any\"}, {\"type\": \"tool\", "
                            "\"name\": ...} or {\"type\": \"none\"}", param="tool_choice")
    if kind == "tool":
        return function_choice(tools, "tool_choice.name", choice.get("name"))
    return {"any": "required"}.get(kind, kind)


def _output_format(body: dict[str, Any]) -> dict[str, Any] | None:
    """``output_config.format`` (structured output) as the chat ``response_format``; its ``effort`` is a hint."""
    config = body.get("output_config")
    if config is None:
        return None
    if not isinstance(config, dict):
        raise ApiError(400, "output_config: must be an object", param="output_config")
    fmt = config.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        raise ApiError(400, "output_config.format: must be {\"type\": \"json_schema\", \"schema\": {...}}",
                       param="output_config.format")
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt["schema"]}}


def sampling_options(body: dict[str, Any], conv: Conversation) -> None:
    """The sampling and tool fields of a Messages body, checked, into ``conv``."""
    refuse_fields(body, REFUSED)
    options = {"stop": stop_list(body, "stop_sequences", 64), "top_p": optional_number(body, "top_p", 0, 1),
               "top_k": optional_int(body, "top_k"), "response_format": _output_format(body)}
    conv.options.update({k: v for k, v in options.items() if v is not None})
    conv.option_fields.update(stop="stop_sequences", response_format="output_config.format")
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        if choice.get("disable_parallel_tool_use") is not None and not isinstance(choice["disable_parallel_tool_use"], bool):
            raise ApiError(400, "tool_choice.disable_parallel_tool_use: must be true or false",
                           param="tool_choice.disable_parallel_tool_use")
        if choice.get("disable_parallel_tool_use"):
            conv.max_tool_calls = 1
    apply_tool_choice(conv, _tool_choice(body, conv.tools))


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise ApiError(400, f"{where}.content must be a string or an array of content blocks")
    for block in content:
        if not isinstance(block, dict) or "type" not in block:
            raise ApiError(400, f"{where}.content holds a block without a 'type'")
    return content


def _text_of(blocks: list[dict[str, Any]]) -> str:
    parts = []
    for b in blocks:
        if b["type"] == "text":
            parts.append(str(b.get("text", "")))
        elif b["type"] == "image":
            parts.append("[image]")
    return "\n".join(p for p in parts if p)


def parse(body: Any) -> Conversation:
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object with model, max_tokens and messages")
    if not isinstance(body.get("max_tokens"), int) or isinstance(body["max_tokens"], bool) or body["max_tokens"] < 1:
        raise ApiError(400, "max_tokens: a positive integer is required")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "messages: a non-empty array is required")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": system if isinstance(system, str) else _text_of(_blocks(system, "system"))})
    for k, m in enumerate(raw):
        where = f"messages.{k}"
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant", "system"):
            raise ApiError(400, f"{where}.role: must be 'user', 'assistant' or 'system'")
        blocks = _blocks(m.get("content"), where)
        if m["role"] == "system":  # Claude Code (2.1) sends its environment block as a system turn in messages
            text = _text_of(blocks)
            if text:
                messages.append({"role": "system", "content": text})
        elif m["role"] == "user":
            for b in blocks:
                if b["type"] == "tool_result":
                    inner = b.get("content")
                    text = inner if isinstance(inner, str) else _text_of(_blocks(inner or [], where))
                    if b.get("is_error"):
                        text = f"[error] {text}"
                    messages.append({"role": "tool", "tool_call_id": str(b.get("tool_use_id") or ""), "content": text})
            text = _text_of(blocks)
            if text:
                messages.append({"role": "user", "content": text})
        else:
            calls = [{"id": str(b.get("id") or new_id("toolu_")), "type": "function",
                      "function": {"name": str(b.get("name") or ""), "arguments": json.dumps(b.get("input") or {})}}
                     for b in blocks if b["type"] == "tool_use"]
            entry: dict[str, Any] = {"role": "assistant", "content": _text_of(blocks) or None}
            if calls:
                entry["tool_calls"] = calls
            messages.append(entry)
    tools = []
    raw_tools = body.get("tools") or []
    if not isinstance(raw_tools, list):
        raise ApiError(400, "tools: an array of tools is required")
    for t in raw_tools:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
            raise ApiError(400, "tools: each tool needs a 'name' that is a string")
        if not isinstance(t.get("description") or "", str) or not isinstance(t.get("input_schema", {}), dict):
            raise ApiError(400, f"tools: tool '{shown(t['name'])}' needs a string 'description' and an object 'input_schema'")
        if "input_schema" in t:  # a client tool (server tools such as web search cannot run upstream)
            tools.append({"type": "function", "function": {"name": t["name"], "description": t.get("description") or "",
                                                           "parameters": t["input_schema"]}})
    conv = Conversation(messages=messages, tools=tools, max_tokens=body["max_tokens"],
                        temperature=optional_temperature(body), stream=optional_bool(body, "stream"),
                        model=model_name(body))
    sampling_options(body, conv)
    return conv


def content_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        args = arguments_of(call)
        blocks.append({"type": "tool_use", "id": call["id"] if call["id"].startswith("toolu_") else "toolu_" + call["id"],
                       "name": call["function"]["name"], "input": args if isinstance(args, dict) else {"input": args}})
    return blocks


def _usage(reply: Reply | None) -> dict[str, int]:
    return {"input_tokens": 0 if reply is None else reply.prompt_tokens,
            "output_tokens": 0 if reply is None else reply.completion_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def stop_of(reply: Reply) -> dict[str, str | None]:
    """``stop_reason`` and ``stop_sequence``: "stop_sequence" and the string when the upstream said the
    reply ended on one of the request's ``stop_sequences`` (``Reply.stop_sequence``), else end_turn,
    tool_use or max_tokens with null."""
    if reply.stop_sequence is not None and reply.finish_reason == "stop":
        return {"stop_reason": "stop_sequence", "stop_sequence": reply.stop_sequence}
    return {"stop_reason": STOP[reply.finish_reason], "stop_sequence": None}


def message(reply: Reply, conv: Conversation, mid: str | None = None) -> dict[str, Any]:
    return {"id": mid or new_id("msg_"), "type": "message", "role": "assistant", "model": conv.model,
            "content": content_blocks(reply), **stop_of(reply), "usage": _usage(reply)}


def opening(conv: Conversation, mid: str, input_tokens: int | None = None) -> list[str]:
    """``message_start`` (``input_tokens``: the lowest-numbered valid candidate's count, None: none came back)
    and a ping."""
    start = {"id": mid, "type": "message", "role": "assistant", "model": conv.model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": {**_usage(None), "input_tokens": input_tokens or 0}}
    return [sse({"type": "message_start", "message": start}, event="message_start"), PING]


def block_events(reply: Reply) -> list[str]:
    out = []
    for i, block in enumerate(content_blocks(reply)):
        if block["type"] == "text":
            out.append(sse({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                           event="content_block_start"))
            out.extend(sse({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": piece}},
                           event="content_block_delta") for piece in pieces(block["text"]))
        else:
            out.append(sse({"type": "content_block_start", "index": i,
                            "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}},
                           event="content_block_start"))
            out.extend(sse({"type": "content_block_delta", "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": piece}},
                           event="content_block_delta") for piece in pieces(json.dumps(block["input"])))
        out.append(sse({"type": "content_block_stop", "index": i}, event="content_block_stop"))
    out.append(sse({"type": "message_delta", "delta": stop_of(reply),
                    "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens}},
                    event="message_delta"))
    out.append(sse({"type": "message_stop"}, event="message_stop"))
    return out


def error_body(message_text: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message_text}}


def error_of(exc: ApiError) -> dict[str, Any]:
    """An ApiError in Anthropic's shape (an unknown model: not_found_error)."""
    return error_body(exc.message, exc.kind)
