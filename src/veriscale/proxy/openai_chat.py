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

from veriscale.proxy.conversation import (ApiError, Conversation, Reply, apply_tool_choice, check_tool_calls,
                                          function_choice, model_name, new_id, optional_bool, optional_int, optional_number,
                                          optional_seed, optional_temperature, refuse_fields, stop_list)
from veriscale.proxy.streaming import pieces
from veriscale.server.stream import sse

KEEPALIVE = ": keep-alive\n\n"
ROLES = ("system", "developer", "user", "assistant", "tool")
#: Chat Completions fields that would change the answer but that the proxy cannot honour: refused with a 400.
#: Accepted with no effect on the answer: user, metadata, store, service_tier, prompt_cache_key,
#: safety_identifier, reasoning_effort, verbosity (hints a chat upstream need not take).
REFUSED = {
    "n": lambda v: None if v == 1 else "the proxy answers with the one candidate it picked: send n = 1 or leave it out",
    "logprobs": lambda v: None if v is False else "the picked candidate's token log-probabilities are not kept: leave it out",
    "top_logprobs": "the picked candidate's token log-probabilities are not kept: leave it out",
    "logit_bias": lambda v: None if v == {} else "token ids differ between upstream models: leave it out",
    "functions": "use 'tools' instead (the proxy takes tool definitions only there)",
    "function_call": "use 'tool_choice' instead",
    "audio": "the upstream models answer in text only: leave it out",
    "modalities": lambda v: None if v == ["text"] else "the upstream models answer in text only: send [\"text\"]",
    "prediction": "predicted outputs are not passed upstream: leave it out",
    "web_search_options": "a chat upstream cannot search the web: leave it out",
}


def _tool_choice(body: dict[str, Any], tools: list[dict[str, Any]]) -> str | dict[str, Any] | None:
    choice = body.get("tool_choice")
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict):
        return function_choice(tools, "tool_choice", choice["function"].get("name"))
    raise ApiError(400, "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                        "\"function\": {\"name\": ...}}", param="tool_choice")


def _response_format(body: dict[str, Any]) -> dict[str, Any] | None:
    value = body.get("response_format")
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") not in ("text", "json_object", "json_schema") or \
            value["type"] == "json_schema" and not isinstance(value.get("json_schema"), dict):
        raise ApiError(400, "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                            "{\"type\": \"json_schema\", \"json_schema\": {...}}", param="response_format")
    return None if value["type"] == "text" else value


def sampling_options(body: dict[str, Any], tools: list[dict[str, Any]], conv: Conversation) -> None:
    """The sampling and tool fields of a chat body, checked, into ``conv`` (its options, seed, tools)."""
    refuse_fields(body, REFUSED)
    options = {"stop": stop_list(body, "stop", 4), "top_p": optional_number(body, "top_p", 0, 1),
               "presence_penalty": optional_number(body, "presence_penalty", -2, 2),
               "frequency_penalty": optional_number(body, "frequency_penalty", -2, 2),
               "response_format": _response_format(body)}
    conv.options.update({k: v for k, v in options.items() if v is not None})
    conv.seed = optional_seed(body)
    if body.get("parallel_tool_calls") is False:
        conv.max_tool_calls = 1
    optional_bool(body, "parallel_tool_calls")
    apply_tool_choice(conv, _tool_choice(body, tools))


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
    conv = Conversation(messages=out, tools=tools, max_tokens=max_tokens, temperature=optional_temperature(body),
                        stream=optional_bool(body, "stream"), model=model_name(body))
    sampling_options(body, tools, conv)
    return conv


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


def error_body(message: str, kind: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_of(exc: ApiError) -> dict[str, Any]:
    """An ApiError in OpenAI's shape (an unknown model: type invalid_request_error, code model_not_found)."""
    kind = "invalid_request_error" if exc.kind == "not_found_error" else exc.kind
    return error_body(exc.message, kind, exc.param, exc.code)
