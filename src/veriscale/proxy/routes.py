"""The three proxy APIs as routes of the ``veriscale serve`` app (same process, same guard).

    add_proxy_routes(app, service)
    # POST /v1/chat/completions   POST /v1/responses   POST /v1/messages   POST /v1/messages/count_tokens
    # GET  /v1/models           the model names a client may ask for ([proxy.aliases])

Each answers in its own API's shapes, errors included: a malformed request gets that API's
400 error object, every candidate failing gets its 502 (within the upstream timeout), and a
stream that fails after it opened ends with that API's error event.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from veriscale.data.reader import JsonLimit, decode_json
from veriscale.proxy import anthropic, openai_chat, responses
from veriscale.proxy.body_schemas import BODIES
from veriscale.proxy.conversation import ApiError, new_id, transcript, unknown_model
from veriscale.proxy.proxied_request import Outcome, ProxyService
from veriscale.proxy.streaming import while_choosing
from veriscale.server.stream import sse

SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


async def _body(request: Request) -> Any:
    try:
        return decode_json((await request.body()).decode("utf-8"), finite=True)
    except json.JSONDecodeError:
        raise ApiError(400, "the body is not valid JSON") from None
    except UnicodeDecodeError:
        raise ApiError(400, "the body is not UTF-8 text: send JSON encoded as UTF-8") from None
    except JsonLimit as exc:  # too deep, a 5,000-digit number, a lone surrogate, NaN or 1E400
        raise ApiError(400, f"the body {exc}") from None


def _failure(exc: BaseException) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    return ApiError(502, str(exc), kind="api_error")


def add_proxy_routes(app: FastAPI, service: ProxyService) -> None:
    history = responses.History()

    def after(conv) -> Callable[[Outcome], None]:
        return lambda outcome: service.track_later(conv, outcome)

    # -- OpenAI Chat Completions ------------------------------------------------------------
    @app.post("/v1/chat/completions", tags=["proxy"], openapi_extra=BODIES["chat"])
    async def chat_completions(request: Request) -> Any:
        try:
            body = await _body(request)
            conv = openai_chat.parse(body)
            service.pools.admit(conv)  # the model name and the options its pool takes, before any call
        except ApiError as exc:
            return JSONResponse(openai_chat.error_of(exc), status_code=exc.status)
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if conv.stream:
            def failed(exc: BaseException) -> list[str]:
                err = _failure(exc)
                return [sse(openai_chat.error_body(err.message, err.kind)), "data: [DONE]\n\n"]

            return StreamingResponse(while_choosing(
                service.answer(conv, "chat"), keepalive=openai_chat.KEEPALIVE, failed=failed, after=after(conv),
                opening=[openai_chat.KEEPALIVE],  # the first byte at once, while the candidates run
                render=lambda o: openai_chat.chunks(o.reply, conv, usage)), media_type="text/event-stream",
                headers=SSE_HEADERS)
        try:
            outcome = await service.answer(conv, "chat")
        except Exception as exc:  # noqa: BLE001 - answered in the API's own error shape
            err = _failure(exc)
            return JSONResponse(openai_chat.error_body(err.message, err.kind), status_code=err.status)
        service.track_later(conv, outcome)
        return JSONResponse(openai_chat.completion(outcome.reply, conv), headers=_pick_headers(outcome))

    # -- OpenAI Responses -------------------------------------------------------------------
    @app.post("/v1/responses", tags=["proxy"], openapi_extra=BODIES["responses"])
    async def create_response(request: Request) -> Any:
        try:
            conv, kinds = responses.parse(await _body(request), history)
            service.pools.admit(conv)
        except ApiError as exc:
            return JSONResponse(openai_chat.error_of(exc), status_code=exc.status)
        rid = new_id("resp_")

        def remember(outcome: Outcome) -> list[dict[str, Any]]:
            items = responses.output_items(outcome.reply, kinds)
            message = {"role": "assistant", "content": outcome.reply.text or None}
            if outcome.reply.tool_calls:
                message["tool_calls"] = outcome.reply.tool_calls
            history.put(rid, conv.messages + [message])
            return items

        if conv.stream:
            numbers = responses.EventNumbers()

            def render(outcome: Outcome) -> list[str]:
                items = remember(outcome)
                return responses.item_events(items, numbers) + [responses.closing(outcome.reply, conv, rid, items, numbers)]

            def failed(exc: BaseException) -> list[str]:
                return [responses.failed(conv, rid, _failure(exc).message, numbers)]

            return StreamingResponse(while_choosing(
                service.answer(conv, "responses"), keepalive=": keep-alive\n\n", failed=failed, after=after(conv),
                opening=responses.opening(conv, rid, numbers), render=render),
                media_type="text/event-stream", headers=SSE_HEADERS)
        try:
            outcome = await service.answer(conv, "responses")
        except Exception as exc:  # noqa: BLE001
            err = _failure(exc)
            return JSONResponse(openai_chat.error_body(err.message, err.kind), status_code=err.status)
        service.track_later(conv, outcome)
        return JSONResponse(responses.response(outcome.reply, conv, rid, remember(outcome)), headers=_pick_headers(outcome))

    # -- Anthropic Messages -----------------------------------------------------------------
    @app.post("/v1/messages", tags=["proxy"], openapi_extra=BODIES["messages"])
    async def create_message(request: Request) -> Any:
        try:
            conv = anthropic.parse(await _body(request))
            service.pools.admit(conv)
        except ApiError as exc:
            return JSONResponse(anthropic.error_of(exc), status_code=exc.status)
        mid = new_id("msg_")
        if conv.stream:
            def failed(exc: BaseException) -> list[str]:
                err = _failure(exc)
                return [sse(anthropic.error_body(err.message, "api_error"), event="error")]

            first = asyncio.get_running_loop().create_future()  # the first candidate's input token count
            return StreamingResponse(while_choosing(
                service.answer(conv, "anthropic", on_first=lambda s: first.done() or first.set_result(s.reply.prompt_tokens)),
                keepalive=anthropic.PING, failed=failed, after=after(conv), first=first, keepalive_before=anthropic.PING,
                opening=lambda tokens: anthropic.opening(conv, mid, tokens), render=lambda o: anthropic.block_events(o.reply)),
                media_type="text/event-stream", headers=SSE_HEADERS)
        try:
            outcome = await service.answer(conv, "anthropic")
        except Exception as exc:  # noqa: BLE001
            err = _failure(exc)
            return JSONResponse(anthropic.error_body(err.message, "api_error"), status_code=err.status)
        service.track_later(conv, outcome)
        return JSONResponse(anthropic.message(outcome.reply, conv, mid), headers=_pick_headers(outcome))

    @app.post("/v1/messages/count_tokens", tags=["proxy"], openapi_extra=BODIES["count_tokens"])
    async def count_tokens(request: Request) -> Any:
        """Counted with the first upstream model's tokenizer over the translated conversation."""
        try:
            body = await _body(request)
            if isinstance(body, dict) and "max_tokens" not in body:
                body = {**body, "max_tokens": 1}
            conv = anthropic.parse(body)
            model = service.pools.pool_for(conv)[0][0].model
        except ApiError as exc:
            return JSONResponse(anthropic.error_of(exc), status_code=exc.status)
        return {"input_tokens": int(model.count_tokens(transcript(conv, max_chars=10**9)))}

    @app.get("/v1/models", tags=["proxy"])
    async def list_models() -> dict[str, Any]:
        """The names a request may give as ``model``, in OpenAI's list shape (Anthropic's fields too)."""
        names = service.pools.names
        return {"object": "list", "data": [_model_entry(name, service) for name in names],
                "has_more": False, "first_id": names[0], "last_id": names[-1]}

    @app.get("/v1/models/{name:path}", tags=["proxy"])
    async def get_model(name: str) -> Any:
        if service.pools.aliases and name not in service.pools.names:
            return JSONResponse(openai_chat.error_of(unknown_model(name, service.pools.names)), status_code=404)
        return _model_entry(name, service)


def _model_entry(name: str, service: ProxyService) -> dict[str, Any]:
    pool = service.pools.aliases.get(name, service.pools.pools)  # upstream URIs are not shown to clients
    return {"id": name, "object": "model", "created": 0, "owned_by": "veriscale", "type": "model",
            "display_name": f"veriscale Best-of-N ({sum(n for _, n in pool)} candidates)",
            "created_at": "1970-01-01T00:00:00Z"}


def _pick_headers(outcome: Outcome) -> dict[str, str]:
    """Where the dashboard shows this request, and how its answer was chosen."""
    return {"x-veriscale-run": str(outcome.run_id), "x-veriscale-pick": outcome.how}
