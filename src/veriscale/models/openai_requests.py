"""The request bodies an OpenAI-compatible backend sends: a slot read (one greedy token with its
logprobs, read the way the probed ``ReadPlan`` says), a joint read (one generation with logprobs at
every position, held to its format), a sampled read, the reasoning turn and a plain chat::

    route = SlotRoute("completions", "chatml", top_logprobs=20)
    route.path                                             # '/completions'
    body = slot_read_body(route, "qwen3-8b", request, plan, "Grade:", "", ids=None, bias=None)
    body = joint_body(route, "qwen3-8b", request, constraint="grammar")

Each function only builds a body; asking the server (and the tokenizer requests a read needs: the
``logprob_token_ids`` and the equal-bias tokens) is the backend's (``openai_compat``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from veriscale.errors import UserError
from veriscale.models.base import Message, ScoreRequest, has_images
from veriscale.models.chat_template import render_chat
from veriscale.models.joint_grammar import joint_gbnf, joint_regex
from veriscale.models.read_probe import WIDE_LOGPROBS, logit_bias
from veriscale.models.read_strategy import EQUAL_BIAS_METHOD, ReadPlan
from veriscale.models.sampled_read import (
    FAITHFUL_SAMPLER,
    FAITHFUL_SAMPLER_EXTRA,
    SAMPLE_MAX_TOKENS,
    SAMPLE_TEMPERATURE,
)

#: generated tokens a joint reply may spend per slot beyond its header (the grade, a newline, slack)
JOINT_TOKENS_PER_SLOT = 4


class ChatTurn(TypedDict):
    """One message of a Chat Completions body: its text, or its content parts (text and ``image_url``)."""

    role: str
    content: str | list[dict[str, Any]]


@dataclass(frozen=True)
class SlotRoute:
    """Where a slot is asked: ``endpoint`` ("chat" or "completions"), the chat ``template`` the
    completions endpoint renders the prompt with, and the ``top_logprobs`` a top-k read asks for."""

    endpoint: str
    template: str | None
    top_logprobs: int

    @property
    def completions(self) -> bool:
        """Whether slots are read through ``/v1/completions`` (prefilled client-side)."""
        return self.endpoint == "completions"

    @property
    def path(self) -> str:
        """The path a slot read is posted to."""
        return "/completions" if self.completions else "/chat/completions"

    def prompt(self, messages: Sequence[Message], prefill: str) -> str:
        """The completions endpoint's prompt: the chat rendered, the assistant turn opened with ``prefill``.
        A prompt rendered as text cannot carry an image: one with images is refused in one sentence."""
        if has_images(messages):
            raise UserError(f"a prompt with images cannot go through /v1/completions (?template={self.template}): "
                            "drop ?template= from the model URI so images go as chat content parts")
        return render_chat(self.template, messages, prefill)


def content_parts(message: Message) -> list[dict[str, Any]]:
    """A message with images as OpenAI content parts, in order: ``{"type": "text", "text": ...}`` and
    ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}``."""
    return [{"type": "text", "text": p} if isinstance(p, str)
            else {"type": "image_url", "image_url": {"url": p.data_url()}} for p in message.parts]


def chat_turns(messages: Sequence[Message]) -> list[ChatTurn]:
    """The request's messages as Chat Completions turns (content parts where a message has images)."""
    return [{"role": m.role, "content": content_parts(m) if m.parts else m.content} for m in messages]


def slot_read_body(route: SlotRoute, model_id: str, request: ScoreRequest, plan: ReadPlan, prefill: str,
                   reasoning: str, *, ids: list[int] | None, bias: dict[str, int] | None) -> dict[str, Any]:
    """A greedy one-token request that ends at the score slot, read the way ``plan`` says: ``ids``
    are the ``logprob_token_ids`` asked for (a ``logprob_token_ids`` plan), ``bias`` the label tokens an
    equal-bias plan raises (the bias on every one of them: max_tokens is 1 and only the logprobs are
    read, so the token it makes the server write is never used)."""
    body: dict[str, Any] = {"model": model_id, "max_tokens": 1, "temperature": 0.0}
    width = WIDE_LOGPROBS if plan.method == "wide-logprobs" else route.top_logprobs
    if route.completions:
        body.update(prompt=route.prompt(request.messages, prefill), logprobs=len(ids) if ids else width)
    else:
        msgs = chat_turns(request.messages)
        if plan.prefilled:
            msgs.append({"role": "assistant", "content": prefill})
            body.update(dict(plan.prefill_fields))
        elif request.reasoning:
            msgs += [{"role": "assistant", "content": f"{request.reasoning_prefix} {reasoning}"},
                     {"role": "user", "content": "Now reply with the grade only."}]
        body.update(messages=msgs, logprobs=True)
        if not ids:
            body["top_logprobs"] = width
    if ids:
        body["logprob_token_ids"] = ids
    if plan.method == EQUAL_BIAS_METHOD and bias:
        body["logit_bias"] = logit_bias(bias)
    return body


def joint_body(route: SlotRoute, model_id: str, request: ScoreRequest, *, constraint: str | None) -> dict[str, Any]:
    """A joint request's greedy body with logprobs at every position: the completions endpoint renders
    the chat with the first slot's header as the assistant's start; chat sends the messages (and the
    model writes every header). ``constraint`` (the plan's ``joint``) holds the reply to its format."""
    headers = [request.prefill, *request.joint]
    budget = JOINT_TOKENS_PER_SLOT * len(headers) + sum(len(h) for h in headers) // 2
    prefilled = route.completions
    max_tokens = budget if prefilled else budget + len(request.prefill) // 2
    base: dict[str, Any] = {"model": model_id, "max_tokens": max_tokens, "temperature": 0.0}
    if prefilled:
        body = {**base, "prompt": route.prompt(request.messages, request.prefill), "logprobs": route.top_logprobs}
    else:
        body = {**base, "messages": chat_turns(request.messages), "logprobs": True, "top_logprobs": route.top_logprobs}
    if constraint == "grammar":
        body["grammar"] = joint_gbnf(headers, request.labels, first_header=not prefilled)
    elif constraint == "structured_outputs":
        body["structured_outputs"] = {"regex": joint_regex(headers, request.labels, first_header=not prefilled)}
    elif constraint == "regex":
        body["regex"] = joint_regex(headers, request.labels, first_header=not prefilled)
    return body


def sampled_body(read_body: dict[str, Any], *, n: int, seed: int, sampler_extra: bool) -> dict[str, Any]:
    """A sampled read's body (``veriscale.models.sampled_read``): ``read_body`` (the plan's one-token
    read) without its logprob fields, ``n`` draws at temperature 1 from ``seed``, with the faithful
    sampler's fields (and llama.cpp's and vLLM's where ``sampler_extra``)."""
    body = {k: v for k, v in read_body.items() if k not in ("logprobs", "top_logprobs", "logprob_token_ids")}
    body.update(temperature=SAMPLE_TEMPERATURE, max_tokens=SAMPLE_MAX_TOKENS, n=n, seed=seed, **FAITHFUL_SAMPLER)
    if sampler_extra:
        body.update(FAITHFUL_SAMPLER_EXTRA)
    return body


def refused_sampler_fields(refusal: Exception) -> list[str]:
    """The llama.cpp / vLLM sampler fields a server's refusal names (``"Unrecognized request argument
    supplied: top_k"`` gives ``["top_k"]``); [] when it names none, so it refused something else."""
    said = str(refusal)
    return [f for f in FAITHFUL_SAMPLER_EXTRA if re.search(rf"(?<![A-Za-z_]){f}(?![A-Za-z_])", said)]


def without_sampler_extra(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with OpenAI's sampler fields only (for a server that refuses llama.cpp's / vLLM's)."""
    return {k: v for k, v in body.items() if k not in FAITHFUL_SAMPLER_EXTRA}


def reasoning_body(route: SlotRoute, model_id: str, request: ScoreRequest) -> tuple[str, dict[str, Any]]:
    """The path and body of the reasoning turn a reasoned score writes before its slot (up to "Grade")."""
    if route.completions:
        return "/completions", {"model": model_id, "prompt": route.prompt(request.messages, request.reasoning_prefix),
                                "max_tokens": request.max_reasoning_tokens, "temperature": request.temperature,
                                "seed": request.seed, "stop": ["Grade"]}
    return "/chat/completions", {"model": model_id, "messages": chat_turns(request.messages),
                                 "max_tokens": request.max_reasoning_tokens, "temperature": request.temperature,
                                 "seed": request.seed, "stop": ["Grade"]}


def chat_body(model_id: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, max_tokens: int,
              temperature: float, seed: int | None, options: dict[str, Any] | None) -> dict[str, Any]:
    """A plain Chat Completions body: ``seed`` only when set, ``tools`` with ``tool_choice: auto``, then
    ``options`` (fields the backend's ``chat_options`` allow, checked by the caller)."""
    body: dict[str, Any] = {"model": model_id, "messages": messages, "max_tokens": max_tokens,
                            "temperature": temperature}
    if seed is not None:
        body["seed"] = seed
    if tools:
        body["tools"] = tools
        body["tool_choice"] = "auto"
    body.update(options or {})
    return body


__all__ = ["JOINT_TOKENS_PER_SLOT", "ChatTurn", "SlotRoute", "chat_body", "chat_turns", "content_parts", "joint_body",
           "reasoning_body", "refused_sampler_fields", "sampled_body", "slot_read_body", "without_sampler_extra"]
