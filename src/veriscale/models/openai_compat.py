"""OpenAI-compatible HTTP backend: vLLM, SGLang, llama.cpp servers, OpenAI-style APIs.

    m = OpenAICompatModel("http://127.0.0.1:8000/v1", model="qwen3-8b")
    m = OpenAICompatModel("http://127.0.0.1:8000/v1", template="chatml")   # /v1/completions + prefill
    m = OpenAICompatModel("http://127.0.0.1:8000/v1", template="chatml", endpoint="chat")  # chat after all

With a chat template named, the score slot is prefilled client-side and read through
``/v1/completions``; otherwise ``/v1/chat/completions`` is asked for one token. Both logprob
shapes are parsed. The HTTP side is ``http_transport.HttpTransport``: retries with exponential backoff on 429, 5xx, timeouts and dropped
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

import copy
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from veriscale.errors import ModelCallError, UserError, setting
from veriscale.models.base import ChatResponse, ScoreRequest, ScoreResponse, drive_sync, slot_entry
from veriscale.models.chat_template import TEMPLATES, render_chat
from veriscale.models.context import estimate_tokens
from veriscale.models.http_transport import HttpTransport
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
#: The most top_logprobs an off-format retry asks for (api.openai.com allows at most 20).
MAX_TOP_LOGPROBS = 100
#: generated tokens a joint reply may spend per slot beyond its header (the grade, a newline, slack)
JOINT_TOKENS_PER_SLOT = 4
Post = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class OpenAICompatModel(HttpTransport):
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
        self.uri = uri or f"{self.base_url}#{model or ''}"
        self.display_name = f"{model or 'model'} at {self.base_url}"
        key = api_key or next((os.environ[k] for k in API_KEY_ENV if os.environ.get(k)), None)
        self.concurrency = concurrency  # this endpoint's cap in the gateway; None: the gateway's setting
        HttpTransport.__init__(self, self.base_url, api_key=key, timeout_s=timeout_s, max_retries=max_retries,
                               backoff_s=backoff_s, max_connections=max(concurrency or 0, 100))
        self._probe = ServerProbe(self.base_url, model, context=context)
        self._label_checks: dict[tuple[str, ...], list[str]] = {}

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
    def _learned_context(self, context: int | None) -> None:
        self._probe.learned_context = context or self._probe.learned_context

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
            body = await self._slot_body(request, post, max_tokens=1, prefill=prefill)
        else:
            after = [{"role": "assistant", "content": f"{request.reasoning_prefix} {reasoning}"},
                     {"role": "user", "content": "Now reply with the grade only."}] if request.reasoning else []
            body = await self._slot_body(request, post, max_tokens=1, after=after)
        data = await post(self._slot_path(), body)
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

    def _slot_path(self) -> str:
        return "/completions" if self.endpoint == "completions" else "/chat/completions"

    async def _slot_body(self, request: ScoreRequest, post: Post, *, max_tokens: int, prefill: str = "",
                         after: list[dict[str, str]] | None = None) -> dict[str, Any]:
        """A greedy request with logprobs that ends at the score slot: the completions endpoint renders
        the chat with ``prefill`` as the assistant's start; chat sends the messages (and ``after`` them)."""
        body: dict[str, Any] = {"model": await self._ident(post), "max_tokens": max_tokens, "temperature": 0.0}
        if self.endpoint == "completions":
            return {**body, "prompt": render_chat(self.template, request.messages, prefill), "logprobs": self.top_logprobs}
        msgs = [{"role": m.role, "content": m.content} for m in request.messages] + list(after or [])
        return {**body, "messages": msgs, "logprobs": True, "top_logprobs": self.top_logprobs}

    async def _score_joint(self, request: ScoreRequest, post: Post) -> ScoreResponse:
        """One generation with logprobs at every position; each slot read right after its header."""
        start = time.perf_counter()
        headers = [request.prefill, *request.joint]
        budget = JOINT_TOKENS_PER_SLOT * len(headers) + sum(len(h) for h in headers) // 2
        prefilled = self.endpoint == "completions"
        body = await self._slot_body(request, post, max_tokens=budget if prefilled else budget + len(request.prefill) // 2,
                                     prefill=request.prefill)
        if self.grammar:
            body["grammar"] = joint_gbnf(headers, request.labels, first_header=not prefilled)
        data = await post(self._slot_path(), body)
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
        usage = reply_usage(data)  # the same honest cost as a one-slot reply: sent, processed, cached
        return ScoreResponse(
            label_probs=slots[0]["label_probs"], label_mass=slots[0]["label_mass"], unseen_mass=slots[0]["unseen_mass"],
            prompt_tokens=usage.prompt_tokens if usage.processed is None else usage.processed,
            prompt_tokens_total=usage.prompt_tokens, cached_prompt_tokens=usage.cached_prompt_tokens,
            completion_tokens=usage.completion_tokens, latency_s=time.perf_counter() - start,
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
        matched = choice.get("stop_reason", choice.get("matched_stop"))  # vLLM / SGLang: the stop string (or token id)
        return ChatResponse(content=msg.get("content") or "", tool_calls=list(msg.get("tool_calls") or []),
                            prompt_tokens=usage.prompt_tokens, cached_prompt_tokens=usage.cached_prompt_tokens,
                            completion_tokens=usage.completion_tokens,
                            finish_reason=str(choice.get("finish_reason") or ""),
                            stop_sequence=matched if isinstance(matched, str) and matched else None,
                            system_fingerprint=str(data.get("system_fingerprint") or ""))
