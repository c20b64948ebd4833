"""What one HTTP reply says it cost: prompt tokens sent, served from a cache, and generated.

Servers say different things, and some say nothing about their cache::

    reply_usage({"usage": {"prompt_tokens": 900, "completion_tokens": 1,
                           "prompt_tokens_details": {"cached_tokens": 768}}})
    # ReplyUsage(prompt_tokens=900, cached_prompt_tokens=768, completion_tokens=1); .processed == 132

Read, in this order: the C++ llama-server's ``timings`` (``prompt_n`` tokens evaluated,
``cache_n`` reused); ``usage.prompt_tokens_details.cached_tokens`` (OpenAI; vLLM with
``--enable-prompt-tokens-details``; SGLang with ``--enable-cache-report``); DeepSeek's
``usage.prompt_cache_hit_tokens``; SGLang's native ``meta_info.cached_tokens``. llama_cpp.server (the Python one) reports none of these:
``cached_prompt_tokens`` is then None, which means *unknown*, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ReplyUsage:
    prompt_tokens: int  # the prompt's length, as the server counted it (what was sent)
    cached_prompt_tokens: int | None  # of those, served from the server's cache; None: the server did not say
    completion_tokens: int

    @property
    def processed(self) -> int | None:
        """Prompt tokens the server evaluated, or None when it did not say."""
        if self.cached_prompt_tokens is None:
            return None
        return max(0, self.prompt_tokens - self.cached_prompt_tokens)


def _count(value: Any) -> int | None:
    """A token count, or None for anything that is not a non-negative whole number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        return None
    return int(value)


def reply_usage(data: Any) -> ReplyUsage:
    """The cost fields of one chat/completions reply body (a parsed JSON object)."""
    data = data if isinstance(data, dict) else {}
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens")) or 0
    cached: int | None = None
    timings = data.get("timings") if isinstance(data.get("timings"), dict) else {}
    evaluated, reused = _count(timings.get("prompt_n")), _count(timings.get("cache_n"))
    if evaluated is not None and reused is not None:  # llama-server: the two add up to the prompt
        cached = reused
        prompt = prompt if prompt is not None else evaluated + reused
        if prompt < reused:
            prompt = evaluated + reused
    else:
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            cached = _count(details.get("cached_tokens"))
        if cached is None:
            cached = _count(usage.get("prompt_cache_hit_tokens"))
        meta = data.get("meta_info") if isinstance(data.get("meta_info"), dict) else {}
        if cached is None and meta:  # SGLang's native reply: meta_info.{prompt_tokens, cached_tokens}
            cached = _count(meta.get("cached_tokens"))
            prompt = prompt if prompt is not None else _count(meta.get("prompt_tokens"))
            completion = completion or _count(meta.get("completion_tokens")) or 0
    prompt = prompt or 0
    if cached is not None:
        cached = min(cached, prompt)
    return ReplyUsage(prompt_tokens=prompt, cached_prompt_tokens=cached, completion_tokens=completion)


def summed_usage(replies: list[dict[str, Any]]) -> dict[str, Any]:
    """What several replies of one reading cost together, as ``ScoreResponse`` fields: prompt tokens
    processed (sent where a reply did not say) and sent, cached (None when any reply did not say) and
    completion tokens."""
    usages = [reply_usage(d) for d in replies]
    return {
        "prompt_tokens": sum(u.prompt_tokens if u.processed is None else u.processed for u in usages),
        "prompt_tokens_total": sum(u.prompt_tokens for u in usages),
        "cached_prompt_tokens": None if any(u.cached_prompt_tokens is None for u in usages)
        else sum(u.cached_prompt_tokens or 0 for u in usages),
        "completion_tokens": sum(u.completion_tokens for u in usages),
    }
