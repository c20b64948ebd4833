"""A run's cost from the calls it used: calls, prompt tokens sent / processed / cached, completion
tokens, model time, and money when a price table is set (:mod:`veriscale.engine.prices`)::

    cost = totals(store.run_calls(run_id))
    cost["prompt_tokens"], cost["prompt_tokens_processed"]   # sent; processed (None: some server did not say)

Cache hits cost nothing and are only counted; failed and cancelled calls count as calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from veriscale.engine.prices import PriceTable, money


def totals(calls: Iterable[dict[str, Any]], prices: PriceTable | None = None) -> dict[str, Any]:
    """Totals over ``calls`` (rows of :meth:`Store.run_calls`); ``money`` only with ``prices``."""
    out: dict[str, Any] = {"calls": 0, "cache_hits": 0, "failed": 0, "cancelled": 0, "prompt_tokens": 0,
                           "prompt_tokens_processed": 0, "cached_prompt_tokens": 0, "unreported_calls": 0,
                           "completion_tokens": 0, "latency_s": 0.0}
    models: dict[str, dict[str, Any]] = {}
    for call in calls:
        if call["cache_hit"]:
            out["cache_hits"] += 1
            continue
        out["calls"] += 1
        out["failed"] += call["status"] == "failed"
        out["cancelled"] += call["status"] == "cancelled"
        out["latency_s"] += call.get("latency_s") or 0.0
        sent, completion = call["prompt_tokens"] or 0, call["completion_tokens"] or 0
        processed, cached = call.get("processed_tokens"), call["cached_tokens"]
        m = models.setdefault(call.get("model") or "?", {"calls": 0, "sent": 0, "processed_reported": 0,
                                                           "cached_reported": 0, "sent_unreported": 0,
                                                           "unreported_calls": 0, "completion": 0})
        m["calls"] += 1
        m["sent"] += sent
        m["completion"] += completion
        out["prompt_tokens"] += sent
        out["completion_tokens"] += completion
        if processed is None:
            if call["status"] == "ok":
                out["unreported_calls"] += 1
                m["unreported_calls"] += 1
            m["sent_unreported"] += sent
        else:
            out["prompt_tokens_processed"] += processed
            out["cached_prompt_tokens"] += cached or 0
            m["processed_reported"] += processed
            m["cached_reported"] += cached or 0
    out["processed_reported"] = out["prompt_tokens_processed"]
    if out["unreported_calls"]:  # some server said nothing: the total is unknown, not the partial sum
        out["prompt_tokens_processed"] = None
        out["cached_prompt_tokens"] = None
    out["latency_s"] = round(out["latency_s"], 3)
    out["models"] = models
    if prices is not None:
        out["money"] = money(models, prices)
    return out
