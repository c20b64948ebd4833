"""Money, only where a price table says what a model's tokens cost (never a made-up price).

A table gives, per model, US dollars per million prompt, cached prompt and completion tokens,
in the config file or as text (``--prices`` / ``$VERISCALE_PRICES``)::

    [prices."openai:gpt-4.1-mini"]
    prompt = 0.40
    cached = 0.10          # optional: cached tokens then cost the prompt price
    completion = 1.60

    table = parse_prices("openai:gpt-4.1-mini=0.40/0.10/1.60; embedded=0/0/0", "--prices")
    money(cost["models"], table)   # {"usd": ..., "exact": True, "unpriced": []}, or None without a table

A model is found by its URI, or by the model id after ``#`` in an HTTP URI. Where a server did not
say which prompt tokens it served from cache, every sent token is priced as uncached and the
sum is marked ``"exact": False`` (an upper bound).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from veriscale.engine.usage import Usage
from veriscale.errors import UserError, setting

FORM = "MODEL=PROMPT/CACHED/COMPLETION (US$ per million tokens; CACHED may be empty), entries split by ';'"


@dataclass(frozen=True)
class Price:
    prompt: float
    cached: float | None
    completion: float


PriceTable = tuple[tuple[str, Price], ...]


def _amount(value: Any, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not number >= 0 or number == float("inf"):
        raise UserError(f"{where} = {value!r} is not a price: give US$ per million tokens, 0 or more")
    return number


def parse_prices(text: str, where: str) -> PriceTable:
    """A table from ``MODEL=PROMPT/CACHED/COMPLETION`` entries split by ';' (``where`` names the input)."""
    entries: list[tuple[str, Price]] = []
    for part in (p.strip() for p in str(text).split(";")):
        if not part:
            continue
        model, eq, amounts = part.rpartition("=")
        fields = amounts.split("/")
        if not eq or not model.strip() or len(fields) != 3:
            raise UserError(f"{where}: '{part}' is not a price entry: write {FORM}")
        prompt, cached, completion = (f.strip() for f in fields)
        entries.append((model.strip(), Price(_amount(prompt, f"{where} {model.strip()} prompt"),
                                             _amount(cached, f"{where} {model.strip()} cached") if cached else None,
                                             _amount(completion, f"{where} {model.strip()} completion"))))
    if not entries:
        raise UserError(f"{where} is empty: write {FORM}, or leave it unset (no money column)")
    return tuple(entries)


def table_from_mapping(data: Mapping[str, Any], where: str) -> PriceTable:
    """A table from the config file's ``[prices]`` (model -> {prompt, cached, completion})."""
    entries: list[tuple[str, Price]] = []
    for model, row in data.items():
        if not isinstance(row, Mapping) or not {"prompt", "completion"} <= set(row) or set(row) - {"prompt", "cached", "completion"}:
            raise UserError(f"{where}: prices.\"{model}\" must be a table of prompt, completion and optional cached "
                            "(US$ per million tokens): fix that table")
        entries.append((str(model), Price(_amount(row["prompt"], f"{where}: prices.\"{model}\".prompt"),
                                          _amount(row["cached"], f"{where}: prices.\"{model}\".cached")
                                          if "cached" in row else None,
                                          _amount(row["completion"], f"{where}: prices.\"{model}\".completion"))))
    return tuple(entries)


def price_table(settings: Any) -> PriceTable | None:
    """The ``prices`` setting of resolved CLI settings as a table (None when unset)."""
    value = getattr(settings, "prices", None)
    if value is None or value == "" or value == {}:
        return None
    origin = settings.origin("prices") if hasattr(settings, "origin") else setting("prices")
    if isinstance(value, Mapping):  # the config file's [prices]
        path = getattr(getattr(settings, "config", None), "path", None)
        return table_from_mapping(value, f"config file '{path}'")
    if isinstance(value, tuple) and all(isinstance(e, tuple) for e in value):
        return value  # already a table
    return parse_prices(str(value), origin)


def price_for(table: PriceTable, model: str) -> Price | None:
    """``model``'s price: its URI, else the model id after '#'."""
    named = dict(table)
    if model in named:
        return named[model]
    ident = model.rpartition("#")[2] if "#" in model else None
    return named.get(ident) if ident else None


def money(by_model: Mapping[str, Mapping[str, Any]], table: PriceTable | None) -> dict[str, Any] | None:
    """US$ for the per-model token totals of :func:`veriscale.engine.run_cost.totals`; None without a table.
    ``usd`` is None when some model has no price (those are listed in ``unpriced``)."""
    return None if table is None else _priced(by_model, table)


def _priced(by_model: Mapping[str, Mapping[str, Any]], table: PriceTable) -> dict[str, Any]:
    """:func:`money` with a table."""
    total, exact, unpriced = 0.0, True, []
    for model, t in by_model.items():
        price = price_for(table, model)
        if price is None:
            unpriced.append(model)
            continue
        cached = t.get("cached_reported") or 0
        uncached = (t.get("processed_reported") or 0) + (t.get("sent_unreported") or 0)
        exact = exact and not t.get("unreported_calls")
        cached_price = price.prompt if price.cached is None else price.cached
        total += (uncached * price.prompt + cached * cached_price + (t.get("completion") or 0) * price.completion) / 1e6
    return {"usd": None if unpriced else round(total, 6), "exact": exact, "unpriced": unpriced}


def usage_money(usage: Usage, model: str, table: PriceTable) -> dict[str, Any]:
    """:func:`money` for one job's :class:`~veriscale.engine.usage.Usage` on one ``model``."""
    reported = usage.processed_prompt_tokens + usage.cached_prompt_tokens
    return _priced({model: {"processed_reported": usage.processed_prompt_tokens, "cached_reported": usage.cached_prompt_tokens,
                          "sent_unreported": max(0, usage.prompt_tokens - reported),
                          "unreported_calls": usage.unreported_calls, "completion": usage.completion_tokens}}, table)
