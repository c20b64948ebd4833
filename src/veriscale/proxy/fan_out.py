"""Fan one request out to N candidates at once, and decide whether they agree.

    pools = UpstreamPools.open(settings, store)          # one gateway per upstream model
    results = await pools.fan_out(conversation, run_id)  # [Sampled(index, model, reply | None, error, latency_s)]
    await pools.fan_out(conversation, run_id, on_arrival=print)   # each Sampled as it comes, on this loop
    agreeing(results)                                    # True: skip verification

Each candidate is one gateway chat call with its own seed, linked to the request's run; a
failed one is kept (with its error) instead of being dropped. The client's sampling and tool
fields (``conv.options``: stop, top_p, tool_choice, ...) go to every candidate call and into its
cache key; :meth:`UpstreamPools.admit` refuses, before any call, a field an upstream cannot take.

**Seeds and the cache** (:func:`candidate_seed`): under a client seed, candidate i's seed derives
from it (the same request gets the same candidates, from the cache); without one, a sampled
request (temperature > 0) gets fresh random seeds, so a retry or "regenerate" samples anew and
nothing is answered from the cache; at temperature 0 the seed is the index (greedy: cached).
Each seed is base + i, so ``seed % SEED_STRIDE`` is the candidate's index.

**Model names** (``[proxy.aliases]``): ``pools.admit(conv)`` resolves ``conv.model`` to its pool.
With no aliases every name is the one pool; with aliases a name is one of them or "veriscale"
(the ``[[proxy.candidates]]`` pool), and any other is the API's not-found error::

    pools.names              # ["veriscale", "fast", "best"]: what GET /v1/models lists
    pools.admit(conv)        # ApiError(404, ..., code="model_not_found") for an unknown name

**Agreement**: the valid candidates agree when they are the same action: the same text after
whitespace is collapsed, and the same tool calls in the same order — same names, arguments
equal as parsed JSON (key order and call ids ignored). A single valid candidate agrees with
itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any, Callable

from veriscale.engine.gateway import Gateway
from veriscale.models.abilities import aclose_backend, chat_options
from veriscale.engine.store import Store
from veriscale.errors import ModelCallError, UserError
from veriscale.proxy.conversation import ApiError, Conversation, Reply, arguments_of, unknown_model
from veriscale.proxy.settings import DEFAULT_NAME, ProxySettings

Pool = list[tuple[Gateway, int]]  # the gateways of one model name, and how many candidates each gives


#: candidate i's seed is base + i, base a multiple of this: ``seed % SEED_STRIDE`` is the candidate's index
SEED_STRIDE = 4096


def candidate_seed(client_seed: int | None, index: int, temperature: float) -> int:
    """Candidate ``index``'s seed (see **Seeds and the cache**): base + index, where base derives from
    the client's seed, is fresh and random for a sampled request without one, and is 0 at temperature 0."""
    if client_seed is not None:
        digest = hashlib.sha256(f"veriscale-candidate/{client_seed}".encode()).digest()
        base = int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
    elif temperature > 0:
        base = secrets.randbelow(2**31)
    else:
        base = 0
    return base - base % SEED_STRIDE + index % SEED_STRIDE


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

    def __init__(self, pools: Pool, settings: ProxySettings, aliases: dict[str, Pool] | None = None) -> None:
        self.pools = pools  # the [[proxy.candidates]] pool ("veriscale")
        self.settings = settings
        self.aliases = dict(aliases or {})

    @classmethod
    def open(cls, settings: ProxySettings, store: Store | None, load=None) -> "UpstreamPools":
        from veriscale.config import load_config
        from veriscale.models.uri import load_backend

        named = dict(settings.models)  # the [models] tables of the file the settings came from
        cfg = load_config(None) if not named else None
        load = load or load_backend
        entries = [*settings.candidates, *(e for _, pool in settings.aliases for e in pool)]
        widest: dict[str, int] = {}
        for name, n in entries:
            widest[name] = max(widest.get(name, 1), n)
        gateways: dict[str, Gateway] = {}  # one gateway a model, whichever names use it

        def gateway(name: str) -> Gateway:
            if name not in gateways:
                uris = list(named.get(name, (name,))) if cfg is None else cfg.model_uris(name)
                gateways[name] = Gateway([load(uri) for uri in uris], store, prompt_version="proxy",
                                         concurrency=widest[name], deadline_s=settings.timeout_s)
            return gateways[name]

        pools = [(gateway(name), n) for name, n in settings.candidates]
        aliases = {alias: [(gateway(name), n) for name, n in pool] for alias, pool in settings.aliases}
        return cls(pools, settings, aliases)

    @property
    def models(self) -> list[str]:
        return [g.model.uri for g, n in self.pools for _ in range(n)]

    async def aclose(self) -> None:
        """Close every upstream backend (its HTTP clients), each once, whichever names share it; the
        embedded model is the process's one shared instance and stays loaded."""
        gateways = {id(g): g for g, _ in [*self.pools, *(e for pool in self.aliases.values() for e in pool)]}
        backends = {id(e.backend): e.backend for g in gateways.values() for e in g.pool.endpoints}
        for backend in backends.values():
            if not backend.is_embedded:
                await aclose_backend(backend)

    @property
    def names(self) -> list[str]:
        """The model names a client may ask for (GET /v1/models)."""
        return [DEFAULT_NAME, *(a for a in self.aliases if a != DEFAULT_NAME)]

    def pool_for(self, conv: Conversation) -> Pool:
        """The pool ``conv.model`` names (see **Model names**); ApiError 404 for an unknown name."""
        if not self.aliases:
            return self.pools
        if conv.model in self.aliases:
            return self.aliases[conv.model]
        if conv.model == DEFAULT_NAME:
            return self.pools
        raise unknown_model(conv.model, self.names)

    def models_for(self, conv: Conversation) -> list[str]:
        """The upstream model of each of ``conv``'s candidates."""
        return [g.model.uri for g, n in self.pool_for(conv) for _ in range(n)]

    def admit(self, conv: Conversation) -> None:
        """Refuse, before any call, what the named pool cannot answer: an unknown model name (404),
        an option an upstream model does not take (400 naming the field and the model)."""
        for gateway, _ in self.pool_for(conv):
            for backend in [e.backend for e in gateway.pool.endpoints]:
                taken = chat_options(backend)
                for key in conv.options:
                    if key not in taken:
                        name = conv.option_fields.get(key, key)
                        raise ApiError(400, f"'{name}' cannot be passed to the upstream model "
                                            f"{backend.uri}, which takes "
                                            f"{', '.join(sorted(taken)) or 'no sampling options'} (chat names): "
                                            "leave it out or configure an upstream that takes it", param=name)

    async def fan_out(self, conv: Conversation, run_id: int | None = None,
                      on_arrival: Callable[[Sampled], None] | None = None) -> list[Sampled]:
        """All N candidates, concurrently; each failure is kept with its error.

        ``on_arrival(sampled)`` is called on the caller's event loop as each candidate comes back
        (or fails), in arrival order, before the whole list is returned.
        """
        async def one(gateway: Gateway, index: int) -> Sampled:
            s = await self._one(gateway, index, conv, run_id)
            if on_arrival is not None:
                on_arrival(s)
            return s

        jobs = []
        index = 0
        for gateway, n in self.pool_for(conv):
            for _ in range(n):
                jobs.append(one(gateway, index))
                index += 1
        return list(await asyncio.gather(*jobs))

    async def _one(self, gateway: Gateway, index: int, conv: Conversation, run_id: int | None) -> Sampled:
        started = time.perf_counter()
        temperature = self.settings.temperature if conv.temperature is None else conv.temperature
        max_tokens = conv.max_tokens or self.settings.max_tokens
        seed = candidate_seed(conv.seed, index, temperature)
        try:
            resp = await asyncio.wait_for(  # the wait for a free upstream slot counts too
                gateway.chat(_upstream(conv.messages), tools=conv.tools or None, max_tokens=max_tokens,
                             temperature=temperature, seed=seed, run_id=run_id, options=dict(conv.options)),
                self.settings.timeout_s)
        except asyncio.TimeoutError:
            return Sampled(index, gateway.model.uri, None, f"no answer within the proxy's {self.settings.timeout_s:g} s "
                           "deadline (proxy.timeout_s), the wait for a free upstream slot included", time.perf_counter() - started)
        except (ModelCallError, UserError) as exc:
            return Sampled(index, gateway.model.uri, None, str(exc), time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - an upstream's crash is that candidate's failure
            return Sampled(index, gateway.model.uri, None, f"{type(exc).__name__}: {exc}", time.perf_counter() - started)
        calls = [_normal_call(c, index, k) for k, c in enumerate(resp.tool_calls)]
        if conv.max_tool_calls is not None:  # parallel_tool_calls false, max_tool_calls: the first ones kept
            calls = calls[:conv.max_tool_calls]
        reply = Reply(text=resp.content or "", tool_calls=calls,
                      prompt_tokens=resp.prompt_tokens, completion_tokens=resp.completion_tokens,
                      truncated=resp.finish_reason == "length", stop_sequence=_stopped_on(resp, conv))
        return Sampled(index, gateway.model.uri, reply, None, time.perf_counter() - started)


def _stopped_on(resp: Any, conv: Conversation) -> str | None:
    """The request's stop sequence the reply ended on: only when the upstream names it (vLLM's
    ``stop_reason``, SGLang's ``matched_stop``) and it is one the request gave. llama.cpp servers
    end a reply at a stop sequence and at the end-of-turn token alike with ``finish_reason`` "stop",
    and cut the sequence from the text, so neither the text nor the reply can tell: None."""
    matched = getattr(resp, "stop_sequence", None)
    return matched if resp.finish_reason == "stop" and matched in (conv.options.get("stop") or ()) else None


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
