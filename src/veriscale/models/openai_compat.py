"""OpenAI-compatible HTTP backend: vLLM, SGLang, llama.cpp servers, OpenAI-style APIs.

    m = OpenAICompatModel("http://127.0.0.1:8000/v1", model="qwen3-8b")
    m = OpenAICompatModel("http://127.0.0.1:8000/v1", template="chatml")   # /v1/completions + prefill
    m = OpenAICompatModel("http://127.0.0.1:8000/v1", template="chatml", endpoint="chat")  # chat after all

With a chat template named, the score slot is prefilled client-side and read through
``/v1/completions``; otherwise ``/v1/chat/completions`` is asked for one token. The bodies sent are
built by ``openai_requests``, the replies read by ``openai_replies`` (both logprob shapes, through
``logprobs``), the server's tokenizer asked by ``openai_tokenizer.ServerTokenizer``; what the backend
knows of its server (identity, fingerprints, the read plan, the reply's model check) is
``openai_server.ServerView``, its base; this module is the backend that asks: the score reads and chat. The HTTP side is ``http_transport.HttpTransport``: retries with exponential backoff on 429, 5xx, timeouts and dropped
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

Every reply is checked against what was asked: a reply that names another model than the one
the URI asked for is a failed call with one sentence, unless ``model_mismatch="note"`` (the
setting, ``$VERISCALE_MODEL_MISMATCH``) lets it be scored with a note on the read plan and in the
log. Another spelling of the same model is no mismatch (``reply_model.same_model``: a dated snapshot,
``-latest``/``:latest`` aliases; no model asked, or none named in the reply). A reply without
logprobs at the slot says whether the server never gives them or drops them now and then.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import replace
from typing import Any

import httpx

from veriscale import settings
from veriscale.errors import ModelCallError, UserError, setting
from veriscale.models.base import ChatResponse, ScoreRequest, ScoreResponse, drive_sync
from veriscale.models.chat_template import TEMPLATES
from veriscale.models.http_transport import HttpTransport
from veriscale.models.logprobs import (
    label_distribution,
    through_whitespace,
    whitespace_paths,
)
from veriscale.models.openai_replies import (
    ReplyShares,
    ServerNames,
    chat_reply,
    joint_positions,
    joint_slots,
    reasoning_reply,
    reply_draws,
    slot_top,
)
from veriscale.models.openai_requests import (
    SlotRoute,
    chat_body,
    joint_body,
    reasoning_body,
    refused_sampler_fields,
    sampled_body,
    slot_read_body,
    without_sampler_extra,
)
from veriscale.models.openai_server import ServerView
from veriscale.models.read_probe import Post, bias_tokens, probe_read_plan, unbiased_top
from veriscale.models.read_strategy import (
    EQUAL_BIAS_METHOD,
    ReadKind,
    ReadPlan,
)
from veriscale.models.reply_model import MODEL_MISMATCH_MODES
from veriscale.models.reply_usage import reply_usage, summed_usage
from veriscale.models.sampled_read import SERVER_SAMPLER_METHOD, check_sample_count, sampled_distribution
from veriscale.models.server_info import ServerProbe

API_KEY_ENV = ("VERISCALE_API_KEY", "OPENAI_API_KEY")
#: The most top_logprobs an off-format retry asks for (api.openai.com allows at most 20).
MAX_TOP_LOGPROBS = 100


class OpenAICompatModel(ServerView):
    """One model on one OpenAI-compatible server."""

    is_embedded = False
    #: chat parameters :meth:`chat` passes through as they are (the Chat Completions names); top_k is
    #: not OpenAI's own but llama.cpp's, vLLM's and most compatible servers' (left out for api.openai.com);
    #: so is grammar (llama.cpp's GBNF, honoured where the read probe found it: ``read_plan().joint``)
    chat_options = frozenset({"stop", "top_p", "top_k", "presence_penalty", "frequency_penalty", "tool_choice",
                              "response_format", "grammar"})

    def __init__(self, base_url: str, *, model: str | None = None, api_key: str | None = None,
                 template: str | None = None, endpoint: str = "auto", top_logprobs: int = 20,
                 timeout_s: float = 120.0, max_retries: int = 4, concurrency: int | None = None,
                 backoff_s: float = 0.5, uri: str | None = None, context: int | None = None,
                 grammar: bool | None = None, weights_file: str | None = None, sample: int | None = None,
                 read: str = "auto", model_mismatch: str | None = None) -> None:
        if template is not None and template not in TEMPLATES:
            raise UserError(f"unknown chat template '{template}': use one of {', '.join(TEMPLATES)}")
        if endpoint not in ("auto", "chat", "completions"):
            raise UserError(f"unknown endpoint '{endpoint}': use chat or completions")
        if endpoint == "completions" and template is None:
            raise UserError("the completions endpoint needs a chat template to prefill the score slot: add template=chatml (or llama3, gemma) to the model URI")
        self.base_url = base_url.rstrip("/")
        if httpx.URL(self.base_url).host == "api.openai.com":
            self.chat_options = self.chat_options - {"top_k", "grammar"}
        self.requested_model = model
        self.template = template
        self.endpoint = endpoint if endpoint != "auto" else ("completions" if template else "chat")
        self.endpoint_chosen = endpoint != "auto" or template is not None  # else the probe may prefer completions
        self.top_logprobs = top_logprobs
        self.grammar = grammar  # None: the probe finds the joint constraint; True: llama.cpp GBNF; False: none
        if weights_file is not None and not os.path.isfile(weights_file):
            raise UserError(f"the weights file '{weights_file}' named by ?weights= does not exist: name the GGUF file the "
                            "server serves, or leave the option out")
        self.weights_file = weights_file  # the GGUF the server serves, as the URI declares (?weights=FILE.gguf)
        self.sample = None if sample is None else check_sample_count(sample, f"model URI '{uri or base_url}'")
        if read not in ("auto", "top-k"):
            raise UserError(f"read={read} in model URI '{uri or base_url}' is not a read: use read=top-k (only the "
                            "top_logprobs the server shows), or leave it out for the most exact read the server gives")
        self.read = read
        if model_mismatch is not None and model_mismatch not in MODEL_MISMATCH_MODES:
            raise UserError(f"model_mismatch={model_mismatch!r} is not fail or note: use "
                            f"{setting('model_mismatch', 'note')} to score replies that name another model")
        self.model_mismatch = model_mismatch  # None: the setting (model_mismatch_mode)
        self._mismatches_noted: set[tuple[str, str]] = set()
        self.logprob_replies = ReplyShares()  # slot replies with and without logprobs, for the failure's sentence
        # a sampled read also sends llama.cpp's and vLLM's sampler fields, unless the server refuses them
        self._sampler_extra = httpx.URL(self.base_url).host != "api.openai.com"
        self.uri = uri or f"{self.base_url}#{model or ''}"
        self.display_name = f"{model or 'model'} at {self.base_url}"
        key = api_key or next(filter(None, map(settings.environment, API_KEY_ENV)), None)
        self.concurrency = concurrency  # this endpoint's cap in the gateway; None: the gateway's setting
        HttpTransport.__init__(self, self.base_url, api_key=key, timeout_s=timeout_s, max_retries=max_retries,
                               backoff_s=backoff_s, max_connections=max(concurrency or 0, 100))
        self._probe = ServerProbe(self.base_url, model, context=context)
        self._label_checks: dict[tuple[str, ...], list[str]] = {}
        self._plan: ReadPlan | None = None  # how a slot is read, probed on first use (read_probe)
        self._slot_ids: dict[tuple[str, ...], list[int] | None] = {}  # logprob_token_ids per label set

    # -- a wider read (identity, the read plan, the reply check: :mod:`veriscale.models.openai_server`) --
    def retry_variant(self) -> OpenAICompatModel | None:
        """The same model asked to show more of the slot's distribution (more top_logprobs), for one
        more try at a reply that put no probability on any label; None when it shows all it can (an
        exact read already shows every label; a sampled read has no top_logprobs to widen)."""
        cap = 20 if "api.openai.com" in self.base_url else MAX_TOP_LOGPROBS
        if self.top_logprobs >= cap or (self._plan is not None and self._plan.kind is not ReadKind.TOP_K):
            return None
        wider = copy.copy(self)
        wider.top_logprobs = min(cap, max(2 * self.top_logprobs, 20))
        if self._plan is not None and self._plan.width is not None:
            # the read it makes is another request: its plan (and so its fingerprint, its calls' keys) says so
            wider._plan = replace(self._plan, width=wider.top_logprobs)
        return wider

    # -- scoring ---------------------------------------------------------------------------
    def _route(self) -> SlotRoute:
        """Where and how wide a slot is asked now (the probe may move it to the completions endpoint)."""
        return SlotRoute(self.endpoint, self.template, self.top_logprobs)

    def _names(self) -> ServerNames:
        return ServerNames(self.base_url, self.display_name)

    async def _generate_reasoning(self, request: ScoreRequest, post: Post) -> tuple[str, int]:
        route = self._route()
        path, body = reasoning_body(route, await self._ident(post), request)
        data = self.check_reply_model(await post(path, body), body)
        return reasoning_reply(data, route.completions)

    def score(self, request: ScoreRequest) -> ScoreResponse:
        return drive_sync(self._score(request, self._sync_post))

    async def ascore(self, request: ScoreRequest) -> ScoreResponse:
        """:meth:`score` on the running event loop."""
        return await self._score(request, self._apost)

    async def _score(self, request: ScoreRequest, post: Post) -> ScoreResponse:
        if request.joint and not request.reasoning:
            return await self._score_joint(request, post)
        start = time.perf_counter()
        plan = self._plan or await self._plan_over(post)
        if plan.kind is ReadKind.SAMPLED:
            return await self._score_sampled(request, post, plan, start)
        reasoning, completion = ("", 0)
        if request.reasoning:
            reasoning, completion = await self._generate_reasoning(request, post)
        prefill = f"{request.reasoning_prefix} {reasoning}\n{request.prefill}" if request.reasoning else request.prefill
        top, replies, plan = await self._read(request, post, plan, prefill, reasoning)
        probs, mass, unseen = label_distribution(top, request.labels)
        strategy = plan.strategy
        if plan.method == "logprob_token_ids":
            unseen = 0.0  # every label's probability was asked for by id: nothing of theirs is unseen
        elif plan.method in ("wide-logprobs", EQUAL_BIAS_METHOD) and not all(
                any(t.strip() == lab for t, _ in top) for lab in request.labels):
            strategy = "top-k"  # a label fell outside even the wide (or biased) read: this reading is cut like top-k
        elif plan.method == EQUAL_BIAS_METHOD:
            unseen = 0.0  # every label is shown, with the weights' ratios: nothing of theirs is unseen
        cost = summed_usage(replies)
        return ScoreResponse(
            label_probs=probs, label_mass=mass, unseen_mass=unseen, reasoning=reasoning,
            **{**cost, "completion_tokens": completion + cost["completion_tokens"]},
            latency_s=time.perf_counter() - start, top_tokens=sorted(top, key=lambda t: -t[1])[:5],
            system_fingerprint=str(replies[0].get("system_fingerprint") or ""),
            strategy=strategy, prefilled=plan.prefilled,
        )

    async def _score_sampled(self, request: ScoreRequest, post: Post, plan: ReadPlan, start: float) -> ScoreResponse:
        """N draws of the grade at temperature 1 (``veriscale.models.sampled_read``): one request with ``n``
        where the server answers that many choices, else one request a draw, each with its own seed."""
        if request.reasoning:
            raise UserError(f"a sampled read draws the grade alone: leave out {setting('reasoning')} with ?sample=")
        n = self.sample or 2
        seed = 0 if request.seed is None else request.seed
        body = sampled_body(await self._plan_body(request, post, plan, request.prefill, ""), n=n, seed=seed,
                            sampler_extra=self._sampler_extra)
        path = self._route().path
        try:
            replies = [await post(path, body)]
        except ModelCallError as exc:
            refused = refused_sampler_fields(exc) if self._sampler_extra and not exc.retryable else []
            if not refused:  # a refusal of anything else is this read's failure, and changes nothing after it
                raise
            self._sampler_extra = False  # OpenAI's sampler fields only, from here on, and said so
            self._changed_plan(f"the server refused {', '.join(refused)} ({exc}): sampled reads send OpenAI's "
                               "sampler fields only from here on, so its own top_k / min_p / repeat penalty may "
                               "bend the draws", method=SERVER_SAMPLER_METHOD)
            body = without_sampler_extra(body)
            replies = [await post(path, body)]
        self.check_reply_model(replies[0], body)
        draws = reply_draws(replies[0])[:n]
        while len(draws) < n:  # the server gave fewer choices than asked: one request a draw
            one = self.check_reply_model(await post(path, {**body, "n": 1, "seed": seed + len(draws) + 1}), body)
            replies.append(one)
            draws += reply_draws(one)[:1] or [""]
        probs, mass = sampled_distribution(draws, request.labels)
        return ScoreResponse(
            label_probs=probs, label_mass=mass, unseen_mass=0.0, **summed_usage(replies),
            latency_s=time.perf_counter() - start,
            system_fingerprint=str(replies[0].get("system_fingerprint") or ""),
            strategy="sampled", prefilled=plan.prefilled, samples=n)

    async def _plan_over(self, post: Post) -> ReadPlan:
        """The read plan, probed over ``post``'s transport on first use."""
        if self._plan is None:
            self._plan = await probe_read_plan(self, post)
        return self._plan

    async def _read(self, request: ScoreRequest, post: Post, plan: ReadPlan, prefill: str, reasoning: str
                    ) -> tuple[list[tuple[str, float]], list[dict[str, Any]], ReadPlan]:
        """The slot's (token, probability) pairs, whitespace paths read through on a prefilled slot
        (as the embedded model does), the replies that made them and the plan used (a server that
        refuses the plan's option mid-run drops to top-k with a note: never an error)."""
        try:
            body = await self._plan_body(request, post, plan, prefill, reasoning)
            data = await post(self._route().path, body)
        except ModelCallError as exc:
            if exc.retryable or plan.kind is not ReadKind.EXACT or plan.endpoint == "embedded":
                raise
            plan = self._fall_back(f"the server refused the {plan.method} read mid-run ({exc}): top-k from here on")
            body = await self._plan_body(request, post, plan, prefill, reasoning)
            data = await post(self._route().path, body)
        self.check_reply_model(data, body)
        top = await self._unbiased(self._top(data), body, request, post)
        replies = [data]
        if plan.prefilled:
            after = {}
            for ws, _ in whitespace_paths(top):
                body = await self._plan_body(request, post, plan, prefill + ws, reasoning)
                more = self.check_reply_model(await post(self._route().path, body), body)
                replies.append(more)
                after[ws] = await self._unbiased(self._top(more), body, request, post)
            top = through_whitespace(top, after)
        return top, replies, plan

    async def _unbiased(self, top: list[tuple[str, float]], body: dict[str, Any], request: ScoreRequest,
                        post: Post) -> list[tuple[str, float]]:
        """An equal-bias reply's pairs on the unbiased scale (``read_probe.unbiased_top``); others as they are."""
        if "logit_bias" not in body:
            return top
        return unbiased_top(top, set(await bias_tokens(self, request.labels, post) or ()))

    def _top(self, data: dict[str, Any]) -> list[tuple[str, float]]:
        """The slot's pairs of a one-token reply (``openai_replies.slot_top``)."""
        return slot_top(data, self.logprob_replies, self._names(),
                        "two-stage scoring, e.g. " + setting("model", f"twostage:{self.uri}+embedded"))

    async def _plan_body(self, request: ScoreRequest, post: Post, plan: ReadPlan, prefill: str,
                         reasoning: str) -> dict[str, Any]:
        """A greedy one-token request that ends at the score slot, read the way ``plan`` says
        (``openai_requests.slot_read_body``; the token ids it needs asked over ``post``'s transport)."""
        model_id = await self._ident(post)
        ids = await self.slot_token_ids(request.labels, post) if plan.method == "logprob_token_ids" else None
        bias = await bias_tokens(self, request.labels, post) if plan.method == EQUAL_BIAS_METHOD else None
        return slot_read_body(self._route(), model_id, request, plan, prefill, reasoning, ids=ids, bias=bias)

    async def _score_joint(self, request: ScoreRequest, post: Post) -> ScoreResponse:
        """One generation with logprobs at every position; each slot read right after its header."""
        start = time.perf_counter()
        route = self._route()  # the body's endpoint, as before the probe (which may move slots to completions)
        model_id = await self._ident(post)
        constraint = (self._plan or await self._plan_over(post)).joint
        body = joint_body(route, model_id, request, constraint=constraint)
        data = self.check_reply_model(await post(self._route().path, body), body)
        positions, why = joint_positions(data, self.logprob_replies, self._names(),
                                         f"score without {setting('joint')}")
        slots = joint_slots(positions, why, [request.prefill, *request.joint], request.labels,
                            first_at_start=self.endpoint == "completions")
        usage = reply_usage(data)  # the same honest cost as a one-slot reply: sent, processed, cached
        return ScoreResponse(
            label_probs=slots[0]["label_probs"], label_mass=slots[0]["label_mass"], unseen_mass=slots[0]["unseen_mass"],
            prompt_tokens=usage.prompt_tokens if usage.processed is None else usage.processed,
            prompt_tokens_total=usage.prompt_tokens, cached_prompt_tokens=usage.cached_prompt_tokens,
            completion_tokens=usage.completion_tokens, latency_s=time.perf_counter() - start,
            system_fingerprint=str(data.get("system_fingerprint") or ""), slots=slots,
            strategy="top-k" if route.completions else "first-token", prefilled=route.completions)

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
        body = chat_body(await self._ident(post), messages, tools, max_tokens, temperature, seed, options)
        data = self.check_reply_model(await post("/chat/completions", body), body)
        return chat_reply(data, self.display_name)
