"""Parser unit tests: the cost fields of recorded reply bodies of each server shape.

These bodies are the shapes the servers document (OpenAI's ``usage.prompt_tokens_details``, the
same field from vLLM and SGLang, DeepSeek's ``prompt_cache_hit_tokens``, the C++ llama-server's
``timings``); the none-reported case of llama_cpp.server is also checked against the real server
in tests/engine/test_honest_cost.py.
"""

from __future__ import annotations

import pytest

from veriscale.engine.usage import CallTokens, Usage
from veriscale.models.base import ChatResponse, ScoreResponse
from veriscale.models.reply_usage import ReplyUsage, reply_usage

CHOICE = [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "length"}]

OPENAI = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1-mini", "choices": CHOICE,
          "usage": {"prompt_tokens": 1536, "completion_tokens": 1, "total_tokens": 1537,
                    "prompt_tokens_details": {"cached_tokens": 1280, "audio_tokens": 0},
                    "completion_tokens_details": {"reasoning_tokens": 0}}}
VLLM_WITH_DETAILS = {"id": "chatcmpl-2", "object": "chat.completion", "model": "Qwen/Qwen3-8B", "choices": CHOICE,
                     "usage": {"prompt_tokens": 812, "total_tokens": 813, "completion_tokens": 1,
                               "prompt_tokens_details": {"cached_tokens": 800}}}
VLLM_WITHOUT_DETAILS = {"id": "chatcmpl-3", "object": "chat.completion", "model": "Qwen/Qwen3-8B", "choices": CHOICE,
                        "usage": {"prompt_tokens": 812, "total_tokens": 813, "completion_tokens": 1,
                                  "prompt_tokens_details": None}}
SGLANG = {"id": "4", "object": "chat.completion", "model": "default", "choices": CHOICE,
          "usage": {"prompt_tokens": 300, "total_tokens": 302, "completion_tokens": 2,
                    "prompt_tokens_details": {"cached_tokens": 256}}}
DEEPSEEK = {"id": "5", "object": "chat.completion", "model": "deepseek-chat", "choices": CHOICE,
            "usage": {"prompt_tokens": 1000, "completion_tokens": 3, "total_tokens": 1003,
                      "prompt_cache_hit_tokens": 640, "prompt_cache_miss_tokens": 360}}
SGLANG_NATIVE = {"text": "A", "meta_info": {"id": "8", "prompt_tokens": 300, "completion_tokens": 1,
                                            "cached_tokens": 288, "finish_reason": {"type": "length", "length": 1}}}
LLAMA_SERVER = {"id": "chatcmpl-6", "object": "chat.completion", "model": "smollm2", "choices": CHOICE,
                "usage": {"completion_tokens": 1, "prompt_tokens": 420, "total_tokens": 421},
                "timings": {"cache_n": 400, "prompt_n": 20, "prompt_ms": 12.5, "predicted_n": 1, "predicted_ms": 3.1}}
LLAMA_CPP_PYTHON = {"id": "chatcmpl-7", "object": "chat.completion", "model": "smollm2", "choices": CHOICE,
                    "usage": {"prompt_tokens": 420, "completion_tokens": 1, "total_tokens": 421}}


@pytest.mark.parametrize("body, sent, cached, processed, completion", [
    (OPENAI, 1536, 1280, 256, 1),
    (VLLM_WITH_DETAILS, 812, 800, 12, 1),
    (VLLM_WITHOUT_DETAILS, 812, None, None, 1),
    (SGLANG, 300, 256, 44, 2),
    (SGLANG_NATIVE, 300, 288, 12, 1),
    (DEEPSEEK, 1000, 640, 360, 3),
    (LLAMA_SERVER, 420, 400, 20, 1),
    (LLAMA_CPP_PYTHON, 420, None, None, 1),
], ids=["openai", "vllm", "vllm-no-details", "sglang", "sglang-native", "deepseek", "llama-server", "llama_cpp.server"])
def test_each_server_shape_reads_sent_cached_and_processed(body, sent, cached, processed, completion):
    usage = reply_usage(body)
    assert usage == ReplyUsage(prompt_tokens=sent, cached_prompt_tokens=cached, completion_tokens=completion)
    assert usage.processed == processed


def test_llama_server_timings_alone_give_the_prompt_length():
    body = {"choices": CHOICE, "timings": {"prompt_n": 7, "cache_n": 93}}
    assert reply_usage(body) == ReplyUsage(prompt_tokens=100, cached_prompt_tokens=93, completion_tokens=0)


@pytest.mark.parametrize("body", [None, [], {"usage": "lots"}, {"usage": {"prompt_tokens": -3}},
                                  {"usage": {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": "5"}}},
                                  {"usage": {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": True}}}])
def test_odd_bodies_give_unknown_never_a_made_up_cache_count(body):
    assert reply_usage(body).cached_prompt_tokens is None


def test_a_cache_count_above_the_prompt_is_capped_at_the_prompt():
    body = {"usage": {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 50}}}
    assert reply_usage(body).processed == 0


def test_call_tokens_of_http_embedded_and_unknown_replies():
    http = ScoreResponse(label_probs={"A": 1.0}, label_mass=1.0, prompt_tokens=256, prompt_tokens_total=1536,
                         cached_prompt_tokens=1280)
    assert CallTokens.of(http, embedded=False) == CallTokens(sent=1536, processed=256, cached=1280, completion=0)
    silent = ScoreResponse(label_probs={"A": 1.0}, label_mass=1.0, prompt_tokens=420, prompt_tokens_total=420)
    assert CallTokens.of(silent, embedded=False) == CallTokens(sent=420, processed=None, cached=None)
    kv = ScoreResponse(label_probs={"A": 1.0}, label_mass=1.0, prompt_tokens=30, prompt_tokens_total=400,
                       completion_tokens=2)
    assert CallTokens.of(kv, embedded=True) == CallTokens(sent=400, processed=30, cached=370, completion=2)
    chat = ChatResponse(content="hi", prompt_tokens=50, completion_tokens=5)
    assert CallTokens.of(chat, embedded=False) == CallTokens(sent=50, processed=None, cached=None, completion=5)


def test_usage_keeps_unknown_unknown_and_sums_what_was_said():
    usage = Usage()
    usage.add_call(CallTokens(sent=100, processed=40, cached=60, completion=1), latency_s=0.5)
    assert usage.processed == 40 and usage.to_dict()["cached_prompt_tokens"] == 60
    before = usage.copy()
    usage.add_call(CallTokens(sent=80, completion=1), latency_s=0.25)
    d = usage.to_dict()
    assert d["prompt_tokens_sent"] == d["prompt_tokens"] == 180
    assert d["prompt_tokens_processed"] is None and d["cached_prompt_tokens"] is None  # unknown, not 40 or 0
    assert d["processed_prompt_tokens"] == 40 and d["unreported_calls"] == 1 and d["model_calls"] == 2
    spent = usage.since(before)
    assert (spent.model_calls, spent.prompt_tokens, spent.unreported_calls, spent.processed) == (1, 80, 1, None)
