"""``veriscale serve-reward``: a remote reward model for OpenRLHF's ``--remote_rm_url``.

    app = create_reward_app(RewardService(BatchRewarder(verifier)), token="s3cret", group_size=8)
    # POST /get_reward  {"query": [...], "prompts": [...], "labels": [...]}
    #   -> {"rewards": [...], "scores": [...], "extra_logs": {...}}

Bad requests get HTTP 400 (413 for a body over ``max_body_bytes``, 401 without the token) and a
JSON ``{"error": "<one sentence>"}``. Concurrent requests are merged by prompt before they are
rewarded (:mod:`veriscale.rewards.batching`): OpenRLHF sends one query per request, so a GRPO
group's completions meet again here. Groups are rewarded in worker threads whose model calls
share the verifier's gateway (cache, concurrency, budget). A request whose client leaves before
its answer (a client timeout) leaves its queries to the client's retry, which gets their result
and joins no group twice; ``answer_within_s`` answers every request within that time. The service's
rewarder may be a Ray pool's (``RewardService(PoolRewarder(pool))``, :mod:`veriscale.rewards.ray_pool`):
the groups are then rewarded by its replicas, and a request none of them is left to reward gets
HTTP 503. Labels may
be any JSON value. :func:`serve` runs the app and, on SIGTERM, rewards the groups still filling
before it exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from veriscale.errors import UserError
from veriscale.models.http_transport import close_loop_clients
from veriscale.rewards.batching import RequestBatcher
from veriscale.rewards.batch_rewards import RewardService
from veriscale.rewards.ray_pool import PoolUnavailable

DEFAULT_MAX_BODY_BYTES = 8 << 20
DISCONNECT_POLL_S = 0.25  # how often a waiting request checks that its client is still there


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _has_token(request: Request, token: str) -> bool:
    """The token as a Bearer header, or as ``?token=`` (OpenRLHF's client sends no headers)."""
    header = request.headers.get("authorization", "")
    query = request.query_params.get("token", "")
    return (hmac.compare_digest(header.encode(), f"Bearer {token}".encode())
            or hmac.compare_digest(query.encode(), token.encode()))


def create_reward_app(service: RewardService, *, token: str | None = None,
                      max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, group_size: int | None = None,
                      group_wait_s: float = 30.0, window_s: float = 0.05,
                      answer_within_s: float | None = None) -> FastAPI:
    """The FastAPI app answering ``POST /get_reward`` (and ``GET /health``); ``app.state.batcher``
    is its :class:`RequestBatcher` (``answer_within_s``: answer every request within that time)."""
    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        """At shutdown: the groups still being rewarded finish, then the HTTP clients this loop opened close
        (the verifier's backend itself belongs to whoever built the service)."""
        yield
        await batcher.drain()
        await close_loop_clients()

    app = FastAPI(title="veriscale reward server", lifespan=lifespan)
    batcher = RequestBatcher(service, group_size=group_size, group_wait_s=group_wait_s, window_s=window_s,
                             answer_within_s=answer_within_s)
    app.state.batcher = batcher

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "filling": batcher.filling}  # queries waiting for their group to fill

    @app.post("/get_reward")
    async def get_reward(request: Request) -> JSONResponse:
        if token is not None and not _has_token(request, token):
            return _error(401, "missing or wrong token: send 'Authorization: Bearer <token>' "
                               "(or ?token=<token> in the URL, for clients that send no headers)")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body_bytes:
                return _error(413, f"request body over {max_body_bytes} bytes: send smaller batches")
        try:
            data: Any = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "the body is not JSON: send {\"query\": [...], \"prompts\": [...]}")
        if not isinstance(data, dict) or "query" not in data:
            return _error(400, "the body has no 'query': send {\"query\": [...], \"prompts\": [...]}")
        if "prompts" not in data:
            return _error(400, "the body has no 'prompts': send the prompt of each query")
        try:
            labels = data.get("labels") or None  # OpenRLHF sends [] or null when there are none
            ticket = batcher.join(data["query"], data["prompts"], labels)
        except UserError as exc:
            return _error(400, str(exc))
        answer = asyncio.ensure_future(batcher.answer(ticket))
        while not answer.done():  # a client that leaves (its timeout) leaves its queries to its retry
            await asyncio.wait({answer}, timeout=DISCONNECT_POLL_S)
            if not answer.done() and await request.is_disconnected():
                batcher.release(ticket)
                answer.cancel()
                return _error(499, "the client left before its rewards were ready: its retry gets them")
        try:
            batch = answer.result()
        except UserError as exc:
            return _error(400, str(exc))
        except PoolUnavailable as exc:  # no Ray replica left to reward it: the client may ask again later
            return _error(503, str(exc))
        return JSONResponse(batch.to_openrlhf())

    return app


def serve(app: FastAPI, *, host: str, port: int) -> None:
    """Run ``app`` on uvicorn until SIGINT/SIGTERM. The first signal rewards the groups still filling
    (their waiting requests get answers, flagged ``partial_group``) before uvicorn's graceful
    shutdown waits for those requests; a second one exits at once, as uvicorn does."""
    import uvicorn

    class RewardServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            loop = getattr(self, "_veriscale_loop", None)
            if loop is not None and not self.should_exit:
                loop.call_soon_threadsafe(app.state.batcher.flush_all)
            super().handle_exit(sig, frame)

        async def serve(self, sockets: Any = None) -> None:
            self._veriscale_loop = asyncio.get_running_loop()
            await super().serve(sockets)

    RewardServer(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
