"""Position bias: a pair whose judgements flip with the slot order.

Every pairwise judgement shows one candidate first: ``i`` in slot A when ``repeat`` is even,
``j`` when it is odd (``veriscale.verify.repeats``). For each pair {a, b} (a < b) this keeps
P(a ≻ b) apart by who was shown first::

    pair_orders(result.comparisons)
    # [{"a": 0, "b": 2, "a_first": 0.9999, "b_first": 0.0106, "n_a_first": 1, "n_b_first": 1,
    #   "gap": 0.9893, "position_bias": True}]

``a_first`` is the mean P(a ≻ b) over the judgements that showed a first, ``b_first`` the mean
P(a ≻ b) over those that showed b first (None when that order was not judged). A pair is marked
``position_bias`` when both orders were judged, they name different winners (one above 0.5,
the other below) and they lie at least :data:`POSITION_BIAS_GAP` apart: its mean (0.505 above)
then averages two confident, opposite verdicts, and is not a close call between the two.
Judgements without a ``repeat`` (a proxied pick's averaged comparison) carry no order and are
left out.
"""

from __future__ import annotations

from typing import Any, Iterable

from veriscale.verify.slot_order import POSITION_BIAS_GAP, is_position_biased


def _fields(judgement: Any) -> tuple[Any, Any, Any, Any]:
    if isinstance(judgement, dict):
        return judgement.get("i"), judgement.get("j"), judgement.get("repeat"), judgement.get("p")
    return judgement.i, judgement.j, judgement.repeat, judgement.p


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def pair_orders(judgements: Iterable[Any]) -> list[dict[str, Any]]:
    """Per pair (sorted by a, then b), the mean P(a ≻ b) in each slot order and the position-bias mark."""
    by_pair: dict[tuple[int, int], tuple[list[float], list[float]]] = {}
    for judgement in judgements:
        i, j, repeat, p = _fields(judgement)
        if not isinstance(repeat, int) or not isinstance(p, (int, float)) or i == j:
            continue
        a, b = (i, j) if i < j else (j, i)
        p_ab = float(p) if a == i else 1.0 - float(p)
        first = i if repeat % 2 == 0 else j  # who sat in slot A
        a_first, b_first = by_pair.setdefault((a, b), ([], []))
        (a_first if first == a else b_first).append(p_ab)
    out = []
    for (a, b), (a_first, b_first) in sorted(by_pair.items()):
        pa, pb = _mean(a_first), _mean(b_first)
        gap = None if pa is None or pb is None else abs(pa - pb)
        out.append({"a": a, "b": b, "a_first": pa, "b_first": pb, "n_a_first": len(a_first),
                    "n_b_first": len(b_first), "gap": gap, "position_bias": is_position_biased(pa, pb)})
    return out


def biased_pairs(judgements: Iterable[Any]) -> list[list[int]]:
    """The ``[a, b]`` pairs marked ``position_bias``."""
    return [[o["a"], o["b"]] for o in pair_orders(judgements) if o["position_bias"]]


__all__ = ["POSITION_BIAS_GAP", "biased_pairs", "is_position_biased", "pair_orders"]
