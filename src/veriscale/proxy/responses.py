"""OpenAI Responses in front (what Codex CLI speaks): ``POST /v1/responses``, streamed or not.

    conv, tools = parse(body, history)          # input items -> chat messages; custom tools remembered
    items = output_items(outcome.reply, tools)  # message / function_call / custom_tool_call items
    response(outcome.reply, conv, rid, items)   # the response object (echoing the request's fields, ECHOED)
    numbers = EventNumbers()                    # a stream: each event numbered in order
    opening(conv, rid, numbers) + item_events(items, numbers)   # response.created ... output_item.done (deltas in pieces)
    closing(reply, conv, rid, items, numbers)   # response.completed, or response.incomplete (max_output_tokens)
    failed(conv, rid, "every upstream candidate failed: ...", numbers)   # response.failed: the SDK raises APIError

Input items translated: ``message`` (input_text / output_text parts), ``function_call``,
``function_call_output``, ``custom_tool_call`` / ``custom_tool_call_output`` (a custom tool
becomes a function with one string parameter ``input`` upstream, and back); ``reasoning``
items and hosted tools (web search, ...) are dropped, since a chat upstream cannot run them.
``instructions`` becomes the system message. ``previous_response_id`` continues a response
this proxy gave (kept in memory, :class:`History`).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from veriscale.data.reader import shown
from veriscale.proxy.conversation import (ApiError, Conversation, Reply, apply_tool_choice, content_text, function_choice,
                                          model_name, new_id, optional_bool, optional_int, optional_number,
                                          optional_temperature, refuse_fields)
from veriscale.proxy.streaming import pieces
from veriscale.server.stream import sse

MAX_HISTORY = 256
#: Responses fields that would change the answer but that the proxy cannot honour: refused with a 400.
#: Accepted with no effect on the answer: reasoning, include, store, metadata, user, service_tier,
#: prompt_cache_key, safety_identifier, truncation, client_metadata (Codex sends several of them).
REFUSED = {
    "top_logprobs": lambda v: None if v == 0 else "the picked candidate's token log-probabilities are not kept: "
                                                 "leave it out",
    "background": lambda v: None if v is False else "the proxy answers in the request itself: leave it out",
    "conversation": "the proxy keeps no conversation objects: send the input (or previous_response_id)",
    "prompt": "the proxy has no stored prompt templates: send 'instructions' and 'input'",
}


#: What the response object repeats of its request, as OpenAI's Responses API does, and its value when
#: the request left the field out (null: the proxy's or the upstream's default applied, unnamed).
ECHOED: dict[str, Any] = {
    "instructions": None, "tools": [], "tool_choice": "auto", "parallel_tool_calls": True, "top_p": None,
    "max_output_tokens": None, "max_tool_calls": None, "previous_response_id": None,
    "text": {"format": {"type": "text"}}, "truncation": "disabled", "reasoning": None, "metadata": {}, "user": None,
    "service_tier": None, "prompt_cache_key": None, "safety_identifier": None, "top_logprobs": None, "background": False,
}


def echoed(body: dict[str, Any]) -> dict[str, Any]:
    """The fields of :data:`ECHOED` as the request gave them (its defaults where it did not)."""
    return {key: json.loads(json.dumps(default)) if body.get(key) is None else body[key]
            for key, default in ECHOED.items()}


def _tool_choice(body: dict[str, Any], tools: list[dict[str, Any]]) -> str | dict[str, Any] | None:
    choice = body.get("tool_choice")
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom"):
        return function_choice(tools, "tool_choice", choice.get("name"))
    raise ApiError(400, "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                        "\"name\": ...}: hosted tools and allowed_tools cannot run on a chat upstream",
                   param="tool_choice")


def _text_format(body: dict[str, Any]) -> dict[str, Any] | None:
    """``text.format`` as the chat ``response_format`` (None for plain text)."""
    text = body.get("text")
    if text is None:
        return None
    fmt = text.get("format") if isinstance(text, dict) else None
    if fmt is None and isinstance(text, dict):
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema") or \
            fmt["type"] == "json_schema" and not isinstance(fmt.get("schema"), dict):
        raise ApiError(400, "'text.format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                            "{\"type\": \"json_schema\", \"name\", \"schema\": {...}}", param="text.format")
    if fmt["type"] == "text":
        return None
    if fmt["type"] == "json_object":
        return {"type": "json_object"}
    schema = {"name": str(fmt.get("name") or "response"), "schema": fmt["schema"]}
    if "strict" in fmt:
        schema["strict"] = bool(fmt["strict"])
    return {"type": "json_schema", "json_schema": schema}


def sampling_options(body: dict[str, Any], conv: Conversation) -> None:
    """The sampling and tool fields of a Responses body, checked, into ``conv``."""
    refuse_fields(body, REFUSED)
    options = {"top_p": optional_number(body, "top_p", 0, 1), "response_format": _text_format(body)}
    conv.options.update({k: v for k, v in options.items() if v is not None})
    conv.option_fields.update(response_format="text.format")
    optional_bool(body, "parallel_tool_calls")
    most = optional_int(body, "max_tool_calls")
    if body.get("parallel_tool_calls") is False:
        most = 1
    conv.max_tool_calls = most
    apply_tool_choice(conv, _tool_choice(body, conv.tools))


@dataclass
class ToolKinds:
    custom: set[str] = field(default_factory=set)  # names of custom (free-text input) tools


class History:
    """Conversations by response id, so ``previous_response_id`` works (newest MAX_HISTORY kept)."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    def get(self, rid: str) -> list[dict[str, Any]] | None:
        return self._items.get(rid)

    def put(self, rid: str, messages: list[dict[str, Any]]) -> None:
        self._items[rid] = messages
        while len(self._items) > MAX_HISTORY:
            self._items.popitem(last=False)


def _tools(raw: Any) -> tuple[list[dict[str, Any]], ToolKinds]:
    if raw is None:
        return [], ToolKinds()
    if not isinstance(raw, list):
        raise ApiError(400, "'tools' must be an array", param="tools")
    tools, kinds = [], ToolKinds()
    for t in raw:
        if not isinstance(t, dict):
            raise ApiError(400, "each tool must be an object", param="tools")
        if t.get("type") in ("function", "custom") and (not isinstance(t.get("name"), str) or not t["name"]
                                                        or not isinstance(t.get("description") or "", str)):
            raise ApiError(400, f"a {t['type']} tool needs a 'name' (and a 'description', if any) that is a string",
                           param="tools")
        if t.get("type") == "function":
            parameters = t.get("parameters") or {"type": "object", "properties": {}}
            if not isinstance(parameters, dict):
                raise ApiError(400, f"tool '{shown(t['name'])}' has 'parameters' that are not a JSON schema object",
                               param="tools")
            tools.append({"type": "function", "function": {"name": t["name"], "description": t.get("description") or "",
                                                           "parameters": parameters}})
        elif t.get("type") == "custom":
            kinds.custom.add(t["name"])
            tools.append({"type": "function", "function": {
                "name": t["name"], "description": (t.get("description") or "") + " (free-form text input)",
                "parameters": {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}}})
    return tools, kinds


def _messages(items: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k, item in enumerate(items):
        if not isinstance(item, dict):
            raise ApiError(400, f"input[{k}] must be an object", param=f"input[{k}]")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise ApiError(400, f"input[{k}] needs a role of user, assistant, system or developer", param=f"input[{k}].role")
            out.append({"role": "system" if role == "developer" else role, "content": content_text(item.get("content"))})
        elif kind in ("function_call", "custom_tool_call"):
            for key in ("arguments", "input", "call_id", "id", "name"):
                if item.get(key) is not None and not isinstance(item[key], str):
                    raise ApiError(400, f"input[{k}].{key} must be a string", param=f"input[{k}].{key}")
            args = item.get("arguments", "") if kind == "function_call" else json.dumps({"input": item.get("input", "")})
            call = {"id": item.get("call_id") or item.get("id") or new_id("call_"), "type": "function",
                    "function": {"name": item.get("name") or "", "arguments": args or "{}"}}
            if out and out[-1]["role"] == "assistant" and not out[-1].get("content") and "tool_calls" in out[-1]:
                out[-1]["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            if item.get("call_id") is not None and not isinstance(item["call_id"], str):
                raise ApiError(400, f"input[{k}].call_id must be a string", param=f"input[{k}].call_id")
            out.append({"role": "tool", "tool_call_id": item.get("call_id") or "",
                        "content": output if isinstance(output, str) else content_text(output)})
        # reasoning items, hosted tool calls, images: nothing a chat upstream can take
    return out


def parse(body: Any, history: History) -> tuple[Conversation, ToolKinds]:
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object with 'model' and 'input'")
    raw = body.get("input")
    if isinstance(raw, str):
        items: list[Any] = [{"type": "message", "role": "user", "content": raw}]
    elif isinstance(raw, list):
        items = raw
    else:
        raise ApiError(400, "'input' must be a string or an array of input items", param="input")
    messages = []
    if body.get("previous_response_id"):
        earlier = history.get(str(body["previous_response_id"]))
        if earlier is None:
            raise ApiError(400, f"previous response '{shown(body['previous_response_id'])}' is not known to this proxy "
                                "(it keeps recent ones in memory): send the whole input instead", param="previous_response_id")
        messages = [m for m in earlier if m["role"] != "system"]
    messages += _messages(items)
    if body.get("instructions"):
        messages.insert(0, {"role": "system", "content": content_text(body["instructions"])})
    if not any(m["role"] in ("user", "tool") for m in messages):
        raise ApiError(400, "'input' holds no user message or tool output to answer", param="input")
    tools, kinds = _tools(body.get("tools"))
    conv = Conversation(messages=messages, tools=tools, max_tokens=optional_int(body, "max_output_tokens"),
                        temperature=optional_temperature(body), stream=optional_bool(body, "stream"),
                        model=model_name(body), echo=echoed(body))
    sampling_options(body, conv)
    return conv, kinds


def output_items(reply: Reply, kinds: ToolKinds) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append({"type": "message", "id": new_id("msg_"), "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}]})
    for call in reply.tool_calls:
        fn = call["function"]
        if fn["name"] in kinds.custom:
            try:
                text = json.loads(fn["arguments"]).get("input", "")
            except (json.JSONDecodeError, AttributeError):
                text = fn["arguments"]
            items.append({"type": "custom_tool_call", "id": new_id("ctc_"), "call_id": call["id"], "name": fn["name"],
                          "input": text, "status": "completed"})
        else:
            items.append({"type": "function_call", "id": new_id("fc_"), "call_id": call["id"], "name": fn["name"],
                          "arguments": fn["arguments"], "status": "completed"})
    return items


def response(reply: Reply | None, conv: Conversation, rid: str, items: list[dict[str, Any]], *,
             status: str = "completed", error: dict[str, Any] | None = None) -> dict[str, Any]:
    usage = None if reply is None else {
        "input_tokens": reply.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.prompt_tokens + reply.completion_tokens}
    incomplete = {"reason": "max_output_tokens"} if reply is not None and reply.truncated and not reply.tool_calls else None
    if incomplete is not None and status == "completed":
        status = "incomplete"  # cut by max_output_tokens, as OpenAI says it
    return {"id": rid, "object": "response", "created_at": int(time.time()), "status": status, "model": conv.model,
            "output": items, **(conv.echo or echoed({})), "temperature": conv.temperature, "usage": usage, "error": error,
            "incomplete_details": incomplete}


class EventNumbers:
    """Numbers the events of one stream (``sequence_number``) and spells them as SSE."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, kind: str, **fields: Any) -> str:
        event = {"type": kind, "sequence_number": self.n, **fields}
        self.n += 1
        return sse(event, event=kind)


def opening(conv: Conversation, rid: str, numbers: EventNumbers) -> list[str]:
    started = response(None, conv, rid, [], status="in_progress")
    return [numbers("response.created", response=started), numbers("response.in_progress", response=started)]


def item_events(items: list[dict[str, Any]], numbers: EventNumbers) -> list[str]:
    out = []
    for i, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            out.append(numbers("response.output_item.added", output_index=i,
                               item={**item, "status": "in_progress", "content": []}))
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            out.append(numbers("response.content_part.added", item_id=item["id"], output_index=i, content_index=0, part=part))
            out.extend(numbers("response.output_text.delta", item_id=item["id"], output_index=i, content_index=0,
                               delta=piece, logprobs=[]) for piece in pieces(text))
            out.append(numbers("response.output_text.done", item_id=item["id"], output_index=i, content_index=0,
                               text=text, logprobs=[]))
            out.append(numbers("response.content_part.done", item_id=item["id"], output_index=i, content_index=0,
                               part={**part, "text": text}))
        elif item["type"] == "function_call":
            out.append(numbers("response.output_item.added", output_index=i,
                               item={**item, "arguments": "", "status": "in_progress"}))
            out.extend(numbers("response.function_call_arguments.delta", item_id=item["id"], output_index=i,
                               delta=piece) for piece in pieces(item["arguments"]))
            out.append(numbers("response.function_call_arguments.done", item_id=item["id"], output_index=i,
                               arguments=item["arguments"], name=item["name"]))
        else:  # custom_tool_call
            out.append(numbers("response.output_item.added", output_index=i, item={**item, "input": "", "status": "in_progress"}))
            out.extend(numbers("response.custom_tool_call_input.delta", item_id=item["id"], output_index=i, delta=piece)
                       for piece in pieces(item["input"]))
            out.append(numbers("response.custom_tool_call_input.done", item_id=item["id"], output_index=i, input=item["input"]))
        out.append(numbers("response.output_item.done", output_index=i, item=item))
    return out


def closing(reply: Reply, conv: Conversation, rid: str, items: list[dict[str, Any]], numbers: EventNumbers) -> str:
    """The stream's last event: ``response.completed``, or ``response.incomplete`` for a reply cut by
    ``max_output_tokens`` (as OpenAI ends such a stream)."""
    done = response(reply, conv, rid, items)
    return numbers("response.incomplete" if done["status"] == "incomplete" else "response.completed", response=done)


def failed(conv: Conversation, rid: str, message: str, numbers: EventNumbers) -> str:
    """``response.failed``, with the error also at the event's top level: the openai SDK raises an
    event carrying ``error`` as ``openai.APIError`` (a ``response.failed`` alone ends its stream
    helper with a bare RuntimeError), and Codex reads ``response.error``."""
    error = {"code": "server_error", "message": message}
    return numbers("response.failed", response=response(None, conv, rid, [], status="failed", error=error),
                   error={"type": "server_error", **error})
