"""OpenAI-compatible HTTP backend: vLLM, SGLang, llama.cpp servers, OpenAI-style APIs.

    m = OpenAICompatModel("http://127.0.0.1:8000/v1", model="qwen3-8b")
    m = OpenAICompatModel("http://127.0.0.1:8000/v1", template="chatml")   # /v1/completions + prefill
    m = OpenAICompatModel("http://127.0.0.1:8000/v1", template="chatml", endpoint="chat")  # chat after all

With a chat template named, the score slot is prefilled client-side and read through
``/v1/completions``; otherwise ``/v1/chat/completions`` is asked for one token. Both logprob
shapes are parsed. Retries with exponential backoff on 429, 5xx, timeouts and dropped
connections (a ``Retry-After`` header on 429/503 sets the wait); a call that still fails raises
ModelCallError (recorded as failed upstream), and so does a reply without logprobs at the
slot: it is that call's failure, not the run's. ``ascore``/``achat``/``amodel_id``/
``afingerprint``/``asingle_token_labels`` are the same calls over an ``httpx.AsyncClient`` for
the gateway's event loop (cancelling one cancels its request); one implementation serves both.

A joint request (``ScoreRequest.joint``) is one generation with logprobs at every position; the
generated text is searched for each slot header and the token right after it is read (a slot
the reply never reaches or writes off format comes back with its ``problem``; the Verifier asks
it alone). A bare space or newline before a grade is read through (``logprobs.joint_slot_tops``).
On llama.cpp servers ``?grammar=on`` holds the reply to its format (``joint_grammar``), so every
slot is reached and each grade written is the most likely label.

What the server says about itself (the ids it serves, its context, its weights, its tokenizer) is
asked once, by ``veriscale.models.server_info``; a model id it does not list is a UserError. A
prompt the server refuses as too long teaches the backend its context (``context_size()``) and
raises ``ContextOverflow``. ``close()``/``aclose()`` close the HTTP clients.

How many calls run at once is the gateway's business (``veriscale.engine.routing``): the URI's
``?concurrency=`` is this endpoint's cap there (``concurrency``, None when the URI gives none),
shared by every gateway in the process through ``limit_key`` (base URL and model)::

    m.limit_key                       # 'http://127.0.0.1:8000/v1#qwen3-8b'
    m.retry_variant()                 # the same model asked with more top_logprobs, or None
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from veriscale.errors import ModelCallError, UserError, setting
from veriscale.models.base import ChatResponse, ScoreRequest, ScoreResponse, drive_sync, slot_entry
from veriscale.models.chat_template import TEMPLATES, render_chat
from veriscale.models.context import estimate_tokens, overflow_error, read_overflow
from veriscale.models.joint_grammar import joint_gbnf
from veriscale.models.logprobs import (
    MalformedLogprobs,
    NoLogprobs,
    first_position_top,
    generated_positions,
    joint_slot_tops,
    label_distribution,
)
from veriscale.models.reply_usage import reply_usage
from veriscale.models.server_info import ServerProbe

API_KEY_ENV = ("VERISCALE_API_KEY", "OPENAI_API_KEY")
#: The longest ``Retry-After`` honoured; a server asking for more gets this.
MAX_RETRY_AFTER_S = 60.0
#: The most top_logprobs an off-format retry asks for (api.openai.com allows at most 20).
MAX_TOP_LOGPROBS = 100
#: generated tokens a joint reply may spend per slot beyond its header (the grade, a newline, slack)
JOINT_TOKENS_PER_SLOT = 4
Post = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
Get = Callable[[str, float], Awaitable[httpx.Response]]


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, (_Retryable, httpx.TimeoutException, httpx.TransportError))


def _retry_after(resp: httpx.Response) -> float | None:
    raw = resp.headers.get("retry-after")
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(raw))) if raw is not None else None
    except ValueError:
        return None




def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class OpenAICompatModel:
    """One model on one OpenAI-compatible server."""

    is_embedded = False
    supports_joint = True  # one generation with logprobs at every position (``_score_joint``)
    #: chat parameters :meth:`chat` passes through as they are (the Chat Completions names); top_k is
    #: not OpenAI's own but llama.cpp's, vLLM's and most compatible servers' (left out for api.openai.com)
    chat_options = frozenset({"stop", "top_p", "top_k", "presence_penalty", "frequency_penalty", "tool_choice",
                              "response_format"})

    def __init__(self, base_url: str, *, model: str | None = None, api_key: str | None = None,
                 template: str | None = None, endpoint: str = "auto", top_logprobs: int = 20,
                 timeout_s: float = 120.0, max_retries: int = 4, concurrency: int | None = None,
                 backoff_s: float = 0.5, uri: str | None = None, context: int | None = None,
                 grammar: bool = False) -> None:
        if template is not None and template not in TEMPLATES:
            raise UserError(f"unknown chat template '{template}': use one of {', '.join(TEMPLATES)}")
        if endpoint not in ("auto", "chat", "completions"):
            raise UserError(f"unknown endpoint '{endpoint}': use chat or completions")
        if endpoint == "completions" and template is None:
            raise UserError("the completions endpoint needs a chat template to prefill the score slot: add template=chatml (or llama3, gemma) to the model URI")
        self.base_url = base_url.rstrip("/")
        if httpx.URL(self.base_url).host == "api.openai.com":
            self.chat_options = self.chat_options - {"top_k"}
        self.requested_model = model
        self.template = template
        self.endpoint = endpoint if endpoint != "auto" else ("completions" if template else "chat")
        self.top_logprobs = top_logprobs
        self.grammar = grammar  # joint replies held to their format by a GBNF grammar (llama.cpp servers)
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.uri = uri or f"{self.base_url}#{model or ''}"
        self.display_name = f"{model or 'model'} at {self.base_url}"
        key = api_key or next((os.environ[k] for k in API_KEY_ENV if os.environ.get(k)), None)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.concurrency = concurrency  # this endpoint's cap in the gateway; None: the gateway's setting
        self._headers = headers
        self._timeout = httpx.Timeout(timeout_s, connect=10.0)
        self._limits = httpx.Limits(max_connections=max(concurrency or 0, 100))
        self._client = httpx.Client(timeout=self._timeout, headers=headers, limits=self._limits)
        self._aclients: dict[int, tuple[Any, httpx.AsyncClient]] = {}
        self._probe = ServerProbe(self.base_url, model, context=context)
        self._label_checks: dict[tuple[str, ...], list[str]] = {}
        self._lock = threading.Lock()

    # -- HTTP with retries -----------------------------------------------------------------
    def _answer(self, url: str, resp: httpx.Response) -> dict[str, Any]:
        """The JSON body of a response, or the error it stands for (retryable or not)."""
        if resp.status_code == 429 or resp.status_code >= 500:
            raise _Retryable(f"HTTP {resp.status_code} from {url}", _retry_after(resp))
        if resp.status_code >= 400:
            detail = resp.text[:300].replace("\n", " ")
            if (overflow := read_overflow(resp.status_code, resp.text)) is not None:
                self._probe.learned_context = overflow.context or self._probe.learned_context
                raise overflow_error(overflow, self.display_name, detail)
            raise ModelCallError(f"{url} answered HTTP {resp.status_code}: {detail}")
        try:
            return resp.json()
        except ValueError:
            raise _Retryable(f"{url} answered with a body that is not JSON") from None

    def _retry_policy(self) -> dict[str, Any]:
        backoff = wait_exponential_jitter(multiplier=self.backoff_s, max=20.0)

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            after = getattr(exc, "retry_after", None)
            return after if after is not None else backoff(state)

        return {"stop": stop_after_attempt(self.max_retries + 1), "reraise": False, "wait": wait,
                "retry": retry_if_exception(_is_retryable)}

    def _failure(self, url: str, exc: RetryError) -> ModelCallError:
        last = exc.last_attempt.exception()
        if isinstance(last, httpx.ConnectError):
            return ModelCallError(f"cannot reach {url} after {self.max_retries + 1} tries: is the server running?", retryable=True)
        what = "timed out" if isinstance(last, httpx.TimeoutException) else str(last)
        return ModelCallError(f"model call failed after {self.max_retries + 1} tries: {what}", retryable=True)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        try:
            for tries in Retrying(**self._retry_policy()):
                with tries:
                    resp = self._client.post(url, json=body)
                    return self._answer(url, resp)
        except RetryError as exc:
            raise self._failure(url, exc) from None
        raise AssertionError("unreachable")

    async def _sync_post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._post(path, body)

    async def _sync_get(self, url: str, timeout: float) -> httpx.Response:
        return self._client.get(url, timeout=timeout)

    async def _sync_probe(self, url: str, body: dict[str, Any]) -> httpx.Response:
        return self._client.post(url, json=body, timeout=10.0)

    def _async_client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        with self._lock:
            found = self._aclients.get(id(loop))
            if found is None or found[0] is not loop:
                found = (loop, httpx.AsyncClient(timeout=self._timeout, headers=self._headers, limits=self._limits))
                self._aclients[id(loop)] = found
        return found[1]

    async def _aget(self, url: str, timeout: float) -> httpx.Response:
        return await self._async_client().get(url, timeout=timeout)

    async def _aprobe(self, url: str, body: dict[str, Any]) -> httpx.Response:
        return await self._async_client().post(url, json=body, timeout=10.0)

    async def _apost(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        client = self._async_client()
        try:
            async for tries in AsyncRetrying(**self._retry_policy()):
                with tries:
                    resp = await client.post(url, json=body)
                    return self._answer(url, resp)
        except RetryError as exc:
            raise self._failure(url, exc) from None
        raise AssertionError("unreachable")

    # -- identity --------------------------------------------------------------------------
    def model_id(self) -> str:
        """The model id used in requests: the URI's, checked against the server's list (asked once)."""
        return self._probe.info(self._client).model_id

    async def amodel_id(self) -> str:
        """:meth:`model_id` through the async client (the gateway's loop keeps serving meanwhile)."""
        return (await self._probe.ainfo(self._async_client())).model_id

    @property
    def limit_key(self) -> str:
        """What the gateway's per-endpoint limits are keyed by: the server and the model asked for."""
        return f"{self.base_url}#{self.requested_model or ''}"

    def fingerprint(self) -> str:
        """``http:<url>#<model id>``, with what the server says about the weights where it says it."""
        return self._fingerprint_of(self._probe.info(self._client))

    async def afingerprint(self) -> str:
        """:meth:`fingerprint` through the async client (for the gateway's event loop)."""
        return self._fingerprint_of(await self._probe.ainfo(self._async_client()))

    def _fingerprint_of(self, info: Any) -> str:
        # a grammar changes what a joint reply writes before its later slots, so its verdicts are kept apart
        return (f"http:{self.base_url}#{info.model_id}" + (f" [{info.weights}]" if info.weights else "")
                + (" +joint-grammar" if self.grammar else ""))

    def retry_variant(self) -> "OpenAICompatModel | None":
        """The same model asked to show more of the slot's distribution (more top_logprobs), for one
        more try at a reply that put no probability on any label; None when it shows all it can."""
        cap = 20 if "api.openai.com" in self.base_url else MAX_TOP_LOGPROBS
        if self.top_logprobs >= cap:
            return None
        wider = copy.copy(self)
        wider.top_logprobs = min(cap, max(2 * self.top_logprobs, 20))
        return wider

    def context_size(self) -> int | None:
        """The context the server reports, else the one an overflow reply named, else the URI's ``context``."""
        self._probe.info(self._client)
        return self._probe.context()

    def count_tokens(self, text: str) -> int:
        """The server's own count where it has a tokenizer, else ``context.estimate_tokens`` (a margin
        over the truth). The same text counts the same from any caller; on an event loop prefer
        :meth:`acount_tokens`, which does not block it."""
        n = self._probe.count(self._client, text)
        return estimate_tokens(text) if n is None else n

    async def acount_tokens(self, text: str) -> int:
        """:meth:`count_tokens` through the async client (the server's count where it has one)."""
        n = await self._probe.acount(self._async_client(), text)
        return estimate_tokens(text) if n is None else n

    def single_token_labels(self, labels: tuple[str, ...]) -> list[str]:
        """Labels that tokenize to more than one token, where the server can tokenize."""
        if labels not in self._label_checks:
            self._label_checks[labels] = drive_sync(self._check_labels(labels, self._sync_probe))
        return list(self._label_checks[labels])

    async def asingle_token_labels(self, labels: tuple[str, ...]) -> list[str]:
        """:meth:`single_token_labels` over the async client."""
        if labels not in self._label_checks:
            self._label_checks[labels] = await self._check_labels(labels, self._aprobe)
        return list(self._label_checks[labels])

    async def _check_labels(self, labels: tuple[str, ...], probe: Any) -> list[str]:
        root = self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url
        bad = []
        for lab in labels:
            counts = []
            for text in (lab, " " + lab):
                n = await self._tokenize_count(root, text, probe)
                if n is None:
                    return []  # cannot check on this server
                counts.append(n)
            if min(counts) != 1:
                bad.append(lab)
        return bad

    async def _tokenize_count(self, root: str, text: str, probe: Any) -> int | None:
        for path, body, field in (("/extras/tokenize", {"input": text}, "tokens"),
                                  ("/tokenize", {"prompt": text, "add_special_tokens": False}, "tokens")):
            try:
                resp = await probe(root + path, {**body, "model": self.requested_model or ""})
                if resp.status_code == 200 and isinstance(resp.json().get(field), list):
                    return len(resp.json()[field])
            except (httpx.HTTPError, ValueError):
                continue
        return None

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close the HTTP clients (async ones on their own loops, where those still run)."""
        self._client.close()
        with self._lock:
            clients, self._aclients = list(self._aclients.values()), {}
        current = asyncio.get_running_loop() if _on_event_loop() else None
        for loop, client in clients:
            if loop.is_closed() or loop is current:  # on its own loop only aclose() can wait for it
                continue
            if loop.is_running():
                try:
                    asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=30)
                except (RuntimeError, TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError):
                    pass
            else:
                loop.run_until_complete(client.aclose())

    async def aclose(self) -> None:
        """Close the HTTP clients from the running loop (the others as :meth:`close` does)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            mine = self._aclients.pop(id(loop), None)
        if mine is not None and mine[0] is loop:
            await mine[1].aclose()
        await asyncio.to_thread(self.close)

    # -- scoring ---------------------------------------------------------------------------
    async def _ident(self, post: Post) -> str:
        """The model id, over the transport ``post`` belongs to."""
        return self.model_id() if post == self._sync_post else await self.amodel_id()

    async def _generate_reasoning(self, request: ScoreRequest, post: Post) -> tuple[str, int]:
        if self.endpoint == "completions":
            body = {"model": await self._ident(post), "prompt": render_chat(self.template, request.messages, request.reasoning_prefix),
                    "max_tokens": request.max_reasoning_tokens, "temperature": request.temperature,
                    "seed": request.seed, "stop": ["Grade"]}
            data = await post("/completions", body)
            text = data["choices"][0].get("text", "")
        else:
            msgs = [{"role": m.role, "content": m.content} for m in request.messages]
            body = {"model": await self._ident(post), "messages": msgs, "max_tokens": request.max_reasoning_tokens,
                    "temperature": request.temperature, "seed": request.seed, "stop": ["Grade"]}
            data = await post("/chat/completions", body)
            text = data["choices"][0]["message"].get("content") or ""
        return text.strip(), int((data.get("usage") or {}).get("completion_tokens", 0))

    def score(self, request: ScoreRequest) -> ScoreResponse:
        return drive_sync(self._score(request, self._sync_post))

    async def ascore(self, request: ScoreRequest) -> ScoreResponse:
        """:meth:`score` on the running event loop."""
        return await self._score(request, self._apost)

    async def _score(self, request: ScoreRequest, post: Post) -> ScoreResponse:
        if request.joint and not request.reasoning:
            return await self._score_joint(request, post)
        start = time.perf_counter()
        reasoning, completion = ("", 0)
        if request.reasoning:
            reasoning, completion = await self._generate_reasoning(request, post)
        if self.endpoint == "completions":
            prefill = f"{request.reasoning_prefix} {reasoning}\n{request.prefill}" if request.reasoning else request.prefill
            body = {"model": await self._ident(post), "prompt": render_chat(self.template, request.messages, prefill),
                    "max_tokens": 1, "temperature": 0.0, "logprobs": self.top_logprobs}
            data = await post("/completions", body)
        else:
            msgs = [{"role": m.role, "content": m.content} for m in request.messages]
            if request.reasoning:
                msgs += [{"role": "assistant", "content": f"{request.reasoning_prefix} {reasoning}"},
                         {"role": "user", "content": "Now reply with the grade only."}]
            body = {"model": await self._ident(post), "messages": msgs, "max_tokens": 1, "temperature": 0.0,
                    "logprobs": True, "top_logprobs": self.top_logprobs}
            data = await post("/chat/completions", body)
        try:
            top = first_position_top(data)
        except NoLogprobs:
            raise ModelCallError(
                f"{self.display_name} returned no logprobs at the score slot: use a server started with logprobs "
                f"enabled, or two-stage scoring, e.g. {setting('model', f'twostage:{self.uri}+embedded')}"
            ) from None
        except MalformedLogprobs as exc:
            raise ModelCallError(f"{self.display_name} returned malformed logprobs ({exc})") from None
        probs, mass, unseen = label_distribution(top, request.labels)
        usage = reply_usage(data)
        return ScoreResponse(
            label_probs=probs, label_mass=mass, unseen_mass=unseen, reasoning=reasoning,
            prompt_tokens=usage.prompt_tokens if usage.processed is None else usage.processed,
            prompt_tokens_total=usage.prompt_tokens, cached_prompt_tokens=usage.cached_prompt_tokens,
            completion_tokens=completion + usage.completion_tokens,
            latency_s=time.perf_counter() - start, top_tokens=sorted(top, key=lambda t: -t[1])[:5],
            system_fingerprint=str(data.get("system_fingerprint") or ""),
        )

    async def _score_joint(self, request: ScoreRequest, post: Post) -> ScoreResponse:
        """One generation with logprobs at every position; each slot read right after its header."""
        start = time.perf_counter()
        headers = [request.prefill, *request.joint]
        budget = JOINT_TOKENS_PER_SLOT * len(headers) + sum(len(h) for h in headers) // 2
        if self.endpoint == "completions":
            body = {"model": await self._ident(post), "prompt": render_chat(self.template, request.messages, request.prefill),
                    "max_tokens": budget, "temperature": 0.0, "logprobs": self.top_logprobs}
        else:
            msgs = [{"role": m.role, "content": m.content} for m in request.messages]
            body = {"model": await self._ident(post), "messages": msgs, "max_tokens": budget + len(request.prefill) // 2,
                    "temperature": 0.0, "logprobs": True, "top_logprobs": self.top_logprobs}
        if self.grammar:
            body["grammar"] = joint_gbnf(headers, request.labels, first_header=self.endpoint != "completions")
        data = await post("/completions" if self.endpoint == "completions" else "/chat/completions", body)
        try:
            positions = generated_positions(data)
        except NoLogprobs:
            raise ModelCallError(
                f"{self.display_name} returned no logprobs in its joint reply: use a server started with logprobs "
                f"enabled, or score without {setting('joint')}") from None
        except MalformedLogprobs as exc:  # unreadable as a whole: every slot is re-asked alone
            positions, why = [], f"the joint reply's logprobs are malformed ({exc})"
        else:
            why = None
        slots = []
        for top, written, problem in (joint_slot_tops(positions, headers, first_at_start=self.endpoint == "completions")
                                      if positions else [(None, "", why or "the joint reply is empty")] * len(headers)):
            if top is None:
                slots.append(slot_entry({lab: 0.0 for lab in request.labels}, 0.0, 1.0, "", problem))
                continue
            probs, mass, unseen = label_distribution(top, request.labels)
            slots.append(slot_entry(probs, mass, unseen, written,
                                    None if mass > 0 else f"the joint reply wrote {written!r} there, not a score label"))
        usage = data.get("usage") or {}
        return ScoreResponse(
            label_probs=slots[0]["label_probs"], label_mass=slots[0]["label_mass"], unseen_mass=slots[0]["unseen_mass"],
            prompt_tokens=int(usage.get("prompt_tokens", 0)), prompt_tokens_total=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)), latency_s=time.perf_counter() - start,
            system_fingerprint=str(data.get("system_fingerprint") or ""), slots=slots)

    def chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
             max_tokens: int = 512, temperature: float = 0.0, seed: int | None = None,
             options: dict[str, Any] | None = None) -> ChatResponse:
        """``options``: more body fields, each one of :attr:`chat_options` (``{"stop": ["3"]}``)."""
        return drive_sync(self._chat(messages, tools, max_tokens, temperature, seed, self._sync_post, options))

    async def achat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                    max_tokens: int = 512, temperature: float = 0.0, seed: int | None = None,
                    options: dict[str, Any] | None = None) -> ChatResponse:
        """:meth:`chat` on the running event loop."""
        return await self._chat(messages, tools, max_tokens, temperature, seed, self._apost, options)

    async def _chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, max_tokens: int,
                    temperature: float, seed: int | None, post: Post,
                    options: dict[str, Any] | None = None) -> ChatResponse:
        unknown = sorted(set(options or {}) - self.chat_options)
        if unknown:
            raise UserError(f"{self.display_name} takes no chat option {', '.join(unknown)}: use "
                            f"{', '.join(sorted(self.chat_options))}")
        body: dict[str, Any] = {"model": await self._ident(post), "messages": messages, "max_tokens": max_tokens,
                                "temperature": temperature}
        if seed is not None:
            body["seed"] = seed
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        body.update(options or {})
        data = await post("/chat/completions", body)
        try:
            choice = data["choices"][0]
            msg = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise ModelCallError(f"{self.display_name} returned a chat response without choices") from None
        usage = reply_usage(data)
        return ChatResponse(content=msg.get("content") or "", tool_calls=list(msg.get("tool_calls") or []),
                            prompt_tokens=usage.prompt_tokens, cached_prompt_tokens=usage.cached_prompt_tokens,
                            completion_tokens=usage.completion_tokens,
                            finish_reason=str(choice.get("finish_reason") or ""),
                            system_fingerprint=str(data.get("system_fingerprint") or ""))
