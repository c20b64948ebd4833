"""The request bodies the three proxy fronts accept, as OpenAPI request-body objects, so
``/openapi.json`` documents them (and schema-driven clients and fuzzers can build them).

    @app.post("/v1/messages", openapi_extra=BODIES["messages"])

The routes read the raw body themselves (``openai_chat.parse``, ``responses.parse``,
``anthropic.parse``), which refuse anything else with the API's own 400 error; these schemas
state the same rules and leave out nothing those parsers take.
"""

from __future__ import annotations

from typing import Any

_TEXT_OR_PARTS = {"anyOf": [{"type": "string"}, {"type": "null"},
                            {"type": "array", "items": {"anyOf": [{"type": "string"}, {
                                "type": "object", "required": ["type"],
                                "properties": {"type": {"type": "string"}, "text": {"type": "string"}}}]}}]}
_TOOL_CALL = {"type": "object", "required": ["function"], "properties": {
    "id": {"type": "string"}, "type": {"type": "string", "enum": ["function"]},
    "function": {"type": "object", "required": ["name"],
                 "properties": {"name": {"type": "string"}, "arguments": {"type": "string"}}}}}
_TEMPERATURE = {"type": "number", "minimum": 0, "maximum": 2}
_POSITIVE = {"type": "integer", "minimum": 1}

CHAT = {"type": "object", "required": ["messages"], "properties": {
    "model": {"type": "string"},
    "messages": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["role"], "properties": {
        "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": _TEXT_OR_PARTS, "tool_calls": {"type": "array", "items": _TOOL_CALL},
        "tool_call_id": {"type": "string"}}}},
    "tools": {"type": "array", "items": {"type": "object", "required": ["function"], "properties": {
        "type": {"type": "string", "enum": ["function"]},
        "function": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "description": {"type": "string"}, "parameters": {"type": "object"}}}}}},
    "max_tokens": _POSITIVE, "max_completion_tokens": _POSITIVE, "temperature": _TEMPERATURE,
    "stream": {"type": "boolean"},
    "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}}}}

RESPONSES = {"type": "object", "required": ["input"], "properties": {
    "model": {"type": "string"}, "instructions": {"type": "string"}, "previous_response_id": {"type": "string"},
    "input": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object", "properties": {
        "type": {"type": "string", "enum": ["message", "function_call", "function_call_output", "custom_tool_call",
                                            "custom_tool_call_output", "reasoning"]},
        "role": {"type": "string", "enum": ["user", "assistant", "system", "developer"]},
        "content": _TEXT_OR_PARTS, "call_id": {"type": "string"}, "name": {"type": "string"},
        "arguments": {"type": "string"}, "input": {"type": "string"}, "output": _TEXT_OR_PARTS}}}]},
    "tools": {"type": "array", "items": {"type": "object", "properties": {
        "type": {"type": "string"}, "name": {"type": "string"}, "description": {"type": "string"},
        "parameters": {"type": "object"}}}},
    "max_output_tokens": _POSITIVE, "temperature": _TEMPERATURE, "stream": {"type": "boolean"}}}

_BLOCK = {"type": "object", "required": ["type"], "properties": {
    "type": {"type": "string", "enum": ["text", "image", "tool_use", "tool_result", "thinking"]},
    "text": {"type": "string"}, "id": {"type": "string"}, "name": {"type": "string"}, "input": {"type": "object"},
    "tool_use_id": {"type": "string"}, "is_error": {"type": "boolean"},
    "content": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object", "required": ["type"]}}]}}}
_ANTHROPIC_PROPERTIES = {
    "model": {"type": "string"}, "max_tokens": _POSITIVE,
    "system": {"anyOf": [{"type": "string"}, {"type": "array", "items": _BLOCK}]},
    "messages": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["role", "content"], "properties": {
        "role": {"type": "string", "enum": ["user", "assistant", "system"]},
        "content": {"anyOf": [{"type": "string"}, {"type": "array", "items": _BLOCK}]}}}},
    "tools": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string", "minLength": 1}, "description": {"type": "string"}, "input_schema": {"type": "object"}}}},
    "temperature": _TEMPERATURE, "stream": {"type": "boolean"}}
MESSAGES = {"type": "object", "required": ["max_tokens", "messages"], "properties": _ANTHROPIC_PROPERTIES}
COUNT_TOKENS = {"type": "object", "required": ["messages"], "properties": _ANTHROPIC_PROPERTIES}


def _request_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


BODIES = {"chat": _request_body(CHAT), "responses": _request_body(RESPONSES), "messages": _request_body(MESSAGES),
          "count_tokens": _request_body(COUNT_TOKENS)}
