"""A model behind Anthropic's Messages API: no logprobs, so the score slot is read by sampling.

The Messages API continues a final assistant message, so the slot is prefilled; each draw is one
request at temperature 1 (the API has no ``n``), and the empirical label distribution is the
reading (``strategy: sampled``, with its standard error beside the reward; every draw is paid
for and counted). A reply naming another model than the one asked is a failed call, or a note
under ``model_mismatch="note"`` (as for OpenAI-compatible servers: ``reply_model.same_model``)::

    m = load_backend("anthropic:claude-sonnet-4-5?sample=16")   # $ANTHROPIC_API_KEY, $ANTHROPIC_BASE_URL
    m.read_plan().describe()     # 'sampled, prefilled (messages, sample=16)'
    m.score(request).label_probs # counts of 16 draws, renormalised over the labels
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from veriscale.errors import ModelCallError, UserError, setting, worded
from veriscale.settings import environment
from veriscale.models.base import ChatResponse, Message, ScoreRequest, ScoreResponse, drive_sync
from veriscale.models.context import estimate_tokens
from veriscale.models.http_transport import HttpTransport
from veriscale.models.reply_model import LOG, MODEL_MISMATCH_MODES, mismatch_sentence, model_mismatch_mode, same_model
from veriscale.models.read_strategy import READ_MARK, ReadKind, ReadPlan
from veriscale.models.sampled_read import SAMPLE_MAX_TOKENS, SAMPLE_TEMPERATURE, check_sample_count, sampled_distribution

API_VERSION = "2023-06-01"
DEFAULT_SAMPLE = 16



def image_blocks(message: Message) -> list[dict[str, Any]]:
    """A message with images as Messages API content blocks, in order: text blocks and base64 image
    blocks (``{"type": "image", "source": {"type": "base64", "media_type": ..., "data": ...}}``)."""
    return [{"type": "text", "text": p} if isinstance(p, str)
            else {"type": "image", "source": {"type": "base64", "media_type": p.mime, "data": p.base64()}}
            for p in message.parts]


class AnthropicMessagesModel(HttpTransport):
    """One model on an Anthropic Messages endpoint (``base_url`` ends in ``/v1``)."""

    is_embedded = False
    chat_options = frozenset({"stop", "top_p", "top_k"})

    def __init__(self, base_url: str, model: str, *, api_key: str, sample: int = DEFAULT_SAMPLE, uri: str = "",
                 timeout_s: float = 120.0, max_retries: int = 4, concurrency: int | None = None,
                 model_mismatch: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        if model_mismatch is not None and model_mismatch not in MODEL_MISMATCH_MODES:
            raise UserError(f"model_mismatch={model_mismatch!r} is not fail or note: use "
                            f"{setting('model_mismatch', 'note')} to score replies that name another model")
        self.model_mismatch = model_mismatch  # None: the setting (reply_model.model_mismatch_mode)
        self._mismatches_noted: set[str] = set()
        self.uri = uri or f"anthropic:{model}"
        self.display_name = f"{model} (Anthropic Messages at {self.base_url})"
        self.sample = check_sample_count(sample, f"model URI '{self.uri}'")
        self.concurrency = concurrency
        HttpTransport.__init__(self, self.base_url, api_key=None, timeout_s=timeout_s, max_retries=max_retries,
                               backoff_s=0.5, max_connections=max(concurrency or 0, 16))
        self._headers.update({"x-api-key": api_key, "anthropic-version": API_VERSION})
        self._client.headers.update(self._headers)
        self._plan = ReadPlan(ReadKind.SAMPLED, True, "messages", "sample", self.sample,
                              notes=("the Messages API gives no logprobs: the slot is read by sampling",))

    # -- identity ---------------------------------------------------------------------------
    @property
    def limit_key(self) -> str:
        return f"{self.base_url}#{self.model}"

    def fingerprint(self) -> str:
        return f"anthropic:{self.base_url}#{self.model}{READ_MARK}{self._plan.key()}"

    def read_plan(self) -> ReadPlan:
        return self._plan

    async def aread_plan(self) -> ReadPlan:
        return self._plan

    def context_size(self) -> int | None:
        return None

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def single_token_labels(self, labels: tuple[str, ...]) -> list[str]:
        return []  # no tokenizer to ask: a draw is matched on its first word instead

    # -- scoring ----------------------------------------------------------------------------
    def score(self, request: ScoreRequest) -> ScoreResponse:
        return drive_sync(self._score(request, self._sync_post, parallel=False))

    async def ascore(self, request: ScoreRequest) -> ScoreResponse:
        return await self._score(request, self._apost, parallel=True)

    def _body(self, messages: list[dict[str, Any]], system: str, max_tokens: int, temperature: float) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "temperature": temperature,
                                "messages": messages}
        if system:
            body["system"] = system
        return body

    async def _score(self, request: ScoreRequest, post: Any, *, parallel: bool) -> ScoreResponse:
        if request.reasoning or request.joint:
            raise UserError(f"a sampled read draws one grade at a time: leave out {setting('reasoning')} and "
                            f"{setting('joint')} with an Anthropic model")
        start = time.perf_counter()
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        msgs = [{"role": m.role, "content": image_blocks(m) if m.parts else m.content}
                for m in request.messages if m.role != "system"]
        msgs.append({"role": "assistant", "content": request.prefill.rstrip()})  # the API refuses trailing space
        body = self._body(msgs, system, SAMPLE_MAX_TOKENS, SAMPLE_TEMPERATURE)
        if parallel:
            replies = list(await asyncio.gather(*(post("/messages", body) for _ in range(self.sample))))
        else:
            replies = [await post("/messages", body) for _ in range(self.sample)]
        for reply in replies:
            self.check_reply_model(reply)
        draws = [_text(r) for r in replies]
        probs, mass = sampled_distribution(draws, request.labels)
        sent = sum(_usage(r, "input_tokens") for r in replies)
        return ScoreResponse(label_probs=probs, label_mass=mass, unseen_mass=0.0, prompt_tokens=sent,
                             prompt_tokens_total=sent, completion_tokens=sum(_usage(r, "output_tokens") for r in replies),
                             latency_s=time.perf_counter() - start, strategy="sampled", prefilled=True,
                             samples=self.sample)

    def check_reply_model(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` when it names the model asked (a dated snapshot of it counts); another model's reply
        is a failed call, or with ``model_mismatch="note"`` scored with a note (once a model)."""
        answered = data.get("model") if isinstance(data, dict) else None
        if same_model(self.model, answered):
            return data
        mode = self.model_mismatch or model_mismatch_mode()
        said = mismatch_sentence(self.base_url, self.model, str(answered).strip(), note=mode == "note")
        if mode != "note":
            raise ModelCallError(said)
        if str(answered) not in self._mismatches_noted:
            self._mismatches_noted.add(str(answered))
            LOG.warning(worded(said))
            self._plan = replace(self._plan, notes=self._plan.notes + (worded(said),))
        return data

    # -- chat -------------------------------------------------------------------------------
    def chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
             max_tokens: int = 512, temperature: float = 0.0, seed: int | None = None,
             options: dict[str, Any] | None = None) -> ChatResponse:
        return drive_sync(self._chat(messages, tools, max_tokens, temperature, self._sync_post, options))

    async def achat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                    max_tokens: int = 512, temperature: float = 0.0, seed: int | None = None,
                    options: dict[str, Any] | None = None) -> ChatResponse:
        return await self._chat(messages, tools, max_tokens, temperature, self._apost, options)

    async def _chat(self, messages: list[dict[str, Any]], tools: Any, max_tokens: int, temperature: float,
                    post: Any, options: dict[str, Any] | None) -> ChatResponse:
        if tools:
            raise UserError(f"{self.display_name} is used here for text only: give tools to an OpenAI-compatible "
                            f"{setting('model')}")
        unknown = sorted(set(options or {}) - self.chat_options)
        if unknown:
            raise UserError(f"{self.display_name} takes no chat option {', '.join(unknown)}: use "
                            f"{', '.join(sorted(self.chat_options))}")
        system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
        body = self._body([{"role": m["role"], "content": m.get("content") or ""} for m in messages
                           if m.get("role") != "system"], system, max_tokens, temperature)
        opts = dict(options or {})
        if "stop" in opts:
            body["stop_sequences"] = list(opts.pop("stop") or [])
        body.update(opts)
        data = self.check_reply_model(await post("/messages", body))
        return ChatResponse(content=_text(data), prompt_tokens=_usage(data, "input_tokens"),
                            completion_tokens=_usage(data, "output_tokens"),
                            finish_reason=str(data.get("stop_reason") or ""),
                            stop_sequence=data.get("stop_sequence") if isinstance(data.get("stop_sequence"), str) else None)


def _text(data: dict[str, Any]) -> str:
    blocks = data.get("content")
    if not isinstance(blocks, list):
        raise ModelCallError("an Anthropic Messages reply had no content list")
    return "".join(str(b.get("text") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")


def _usage(data: dict[str, Any], field: str) -> int:
    usage = data.get("usage")
    value = usage.get(field) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def from_uri(uri: str) -> AnthropicMessagesModel:
    """``anthropic:<model>[?sample=N]`` with ``$ANTHROPIC_API_KEY`` (``$ANTHROPIC_BASE_URL`` for another host)."""
    from urllib.parse import parse_qs

    body, _, query = uri.partition("?")
    model = body.split(":", 1)[1]
    opts = parse_qs(query)
    unknown = sorted(set(opts) - {"sample"})
    if unknown:
        raise UserError(f"unknown option {unknown[0]} in model URI '{uri}': an Anthropic model takes sample")
    if not model:
        raise UserError(f"model URI '{uri}' names no model: write anthropic:<model>, e.g. anthropic:claude-sonnet-4-5")
    key = environment("ANTHROPIC_API_KEY")
    if not key:
        raise UserError("anthropic: models need an API key: export ANTHROPIC_API_KEY=... "
                        f"(or point {setting('model')} at a model with logprobs)")
    raw = opts.get("sample", [str(DEFAULT_SAMPLE)])[0]
    try:
        sample = int(raw)
    except ValueError:
        raise UserError(f"option sample={raw} in model URI '{uri}' is not a whole number: give e.g. sample=16") from None
    base = (environment("ANTHROPIC_BASE_URL") or "https://api.anthropic.com").rstrip("/")
    return AnthropicMessagesModel(base if base.endswith("/v1") else base + "/v1", model, api_key=key, sample=sample,
                                  uri=uri)
