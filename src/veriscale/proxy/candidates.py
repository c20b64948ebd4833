"""Fan one request out to N candidates at once, and decide whether they agree.

    pools = UpstreamPools.open(settings, store)          # one gateway per upstream model
    results = await pools.fan_out(conversation, run_id)  # [Sampled(index, model, reply | None, error, latency_s)]
    await pools.fan_out(conversation, run_id, on_arrival=print)   # each Sampled as it comes, on this loop
    agreeing(results)                                    # True: skip verification

Each candidate is one gateway chat call with its own seed (index), so the N samples of one
model differ, are cached and linked to the request's run, and a failed one is kept (with its
error) instead of being dropped.

**Agreement**: the valid candidates agree when they are the same action: the same text after
whitespace is collapsed, and the same tool calls in the same order — same names, arguments
equal as parsed JSON (key order and call ids ignored). A single valid candidate agrees with
itself.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from veriscale.engine.gateway import Gateway
from veriscale.engine.loop import on_gateway_loop
from veriscale.engine.store import Store
from veriscale.errors import ModelCallError, UserError
from veriscale.proxy.conversation import Conversation, Reply, arguments_of
from veriscale.proxy.settings import ProxySettings


@dataclass
class Sampled:
    index: int
    model: str
    reply: Reply | None
    error: str | None
    latency_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "model": self.model, "reply": None if self.reply is None else self.reply.to_dict(),
                "error": self.error, "latency_s": round(self.latency_s, 4)}


def canonical_form(reply: Reply) -> str:
    """The action a reply stands for (see **Agreement**): equal forms agree."""
    calls = [(c.get("function", {}).get("name"), arguments_of(c)) for c in reply.tool_calls]
    return json.dumps([" ".join(reply.text.split()), calls], sort_keys=True, ensure_ascii=False)


def agreeing(results: list[Sampled]) -> bool:
    """Whether every valid candidate is the same action (see the module docstring)."""
    forms = {canonical_form(r.reply) for r in results if r.reply is not None}
    return len(forms) == 1


class UpstreamPools:
    """The upstream models and how many candidates each gives."""

    def __init__(self, pools: list[tuple[Gateway, int]], settings: ProxySettings) -> None:
        self.pools = pools
        self.settings = settings

    @classmethod
    def open(cls, settings: ProxySettings, store: Store | None, load=None) -> "UpstreamPools":
        from veriscale.config import load_config
        from veriscale.models.uri import load_backend

        named = dict(settings.models)  # the [models] tables of the file the settings came from
        cfg = load_config(None) if not named else None
        load = load or load_backend
        pools = []
        for name, n in settings.candidates:
            uris = list(named.get(name, (name,))) if cfg is None else cfg.model_uris(name)
            backends = [load(uri) for uri in uris]
            pools.append((Gateway(backends, store, prompt_version="proxy", concurrency=max(n, 1),
                                  deadline_s=settings.timeout_s), n))
        return cls(pools, settings)

    @property
    def models(self) -> list[str]:
        return [g.model.uri for g, n in self.pools for _ in range(n)]

    async def fan_out(self, conv: Conversation, run_id: int | None = None,
                      on_arrival: Callable[[Sampled], None] | None = None) -> list[Sampled]:
        """All N candidates, concurrently; each failure is kept with its error.

        ``on_arrival(sampled)`` is called on the caller's event loop as each candidate comes back
        (or fails), in arrival order, before the whole list is returned.
        """
        hand_over = None
        if on_arrival is not None:  # called on the gateway loop: each hand-over is queued on the caller's
            hand_over = functools.partial(asyncio.get_running_loop().call_soon_threadsafe, on_arrival)
        return await on_gateway_loop(self._fan_out(conv, run_id, hand_over))  # one hop for all N; the
        # hand-overs were queued on this loop before the result's own callback, so they ran first

    async def _fan_out(self, conv: Conversation, run_id: int | None,
                       hand_over: Callable[[Sampled], None] | None = None) -> list[Sampled]:
        async def one(gateway: Gateway, index: int) -> Sampled:
            s = await self._one(gateway, index, conv, run_id)
            if hand_over is not None:
                hand_over(s)
            return s

        jobs = []
        index = 0
        for gateway, n in self.pools:
            for _ in range(n):
                jobs.append(one(gateway, index))
                index += 1
        return list(await asyncio.gather(*jobs))

    async def _one(self, gateway: Gateway, index: int, conv: Conversation, run_id: int | None) -> Sampled:
        started = time.perf_counter()
        temperature = self.settings.temperature if conv.temperature is None else conv.temperature
        max_tokens = conv.max_tokens or self.settings.max_tokens
        try:
            resp = await asyncio.wait_for(  # the wait for a free upstream slot counts too
                gateway.chat(_upstream(conv.messages), tools=conv.tools or None, max_tokens=max_tokens,
                             temperature=temperature, seed=index, run_id=run_id), self.settings.timeout_s)
        except asyncio.TimeoutError:
            return Sampled(index, gateway.model.uri, None, f"no answer within the proxy's {self.settings.timeout_s:g} s "
                           "deadline (proxy.timeout_s), the wait for a free upstream slot included", time.perf_counter() - started)
        except (ModelCallError, UserError) as exc:
            return Sampled(index, gateway.model.uri, None, str(exc), time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - an upstream's crash is that candidate's failure
            return Sampled(index, gateway.model.uri, None, f"{type(exc).__name__}: {exc}", time.perf_counter() - started)
        reply = Reply(text=resp.content or "", tool_calls=[_normal_call(c, index, k) for k, c in enumerate(resp.tool_calls)],
                      prompt_tokens=resp.prompt_tokens, completion_tokens=resp.completion_tokens,
                      truncated=resp.finish_reason == "length")
        return Sampled(index, gateway.model.uri, reply, None, time.perf_counter() - started)


def _upstream(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An assistant turn that only calls tools goes upstream with content "" instead of null:
    llama.cpp's OpenAI server (llama-cpp-python) answers a null assistant content with HTTP 500,
    which failed every agent's second request (after its first tool call)."""
    return [{**m, "content": ""} if m.get("role") == "assistant" and m.get("content") is None else m
            for m in messages]


def _normal_call(call: dict[str, Any], index: int, k: int) -> dict[str, Any]:
    fn = call.get("function") or {}
    args = fn.get("arguments")
    if not isinstance(args, str):
        args = json.dumps(args or {}, ensure_ascii=False)
    return {"id": call.get("id") or f"call_{index}_{k}", "type": "function",
            "function": {"name": fn.get("name") or "", "arguments": args}}
