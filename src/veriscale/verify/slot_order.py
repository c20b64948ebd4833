"""Slot order: does a pairwise verdict flip with which candidate is shown first?

Pairwise repeats alternate the slot order (a first on even repeats, b first on odd ones). The
rule that marks a flip lives here, so every verdict that judged both orders (a ``compare``, a
``select`` pair, the proxy's pick, the REST views) marks it the same way::

    is_position_biased(0.93, 0.08)          # True: opposite winners, 0.85 apart
    order_verdicts(readings, tau)           # {"a_first": 0.93, "b_first": 0.08, "gap": 0.85,
                                            #  "position_bias": True}
"""

from __future__ import annotations

import math
from typing import Any, Iterable

#: How far apart the two slot orders' mean P(a ≻ b) must be (on opposite sides of 0.5) to mark the pair.
POSITION_BIAS_GAP = 0.5


def is_position_biased(a_first: float | None, b_first: float | None) -> bool:
    """Whether the two slot orders' P(a ≻ b) name different winners at least POSITION_BIAS_GAP apart."""
    if a_first is None or b_first is None:
        return False
    opposite = (a_first - 0.5) * (b_first - 0.5) < 0
    return opposite and abs(a_first - b_first) >= POSITION_BIAS_GAP


def order_verdicts(readings: Iterable[Any], tau: float) -> dict[str, Any]:
    """P(a ≻ b) from the readings of each slot order alone (``a_first``: a shown first; None where
    that order was not judged or a reading failed), their gap and the position-bias mark."""
    by_order: dict[str, dict[str, list[float]]] = {"AB": {"a": [], "b": []}, "BA": {"a": [], "b": []}}
    failed: set[str] = set()
    for r in readings:
        if r.order not in by_order:
            continue
        if r.value is None:
            failed.add(r.order)
        else:
            by_order[r.order][r.candidate].append(r.value)

    def p(order: str) -> float | None:
        a, b = by_order[order]["a"], by_order[order]["b"]
        if order in failed or not a or not b:
            return None
        x = (sum(a) / len(a) - sum(b) / len(b)) / tau
        return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))

    a_first, b_first = p("AB"), p("BA")
    gap = None if a_first is None or b_first is None else abs(a_first - b_first)
    return {"a_first": a_first, "b_first": b_first, "gap": gap, "position_bias": is_position_biased(a_first, b_first)}
