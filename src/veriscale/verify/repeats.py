"""What repeat r of a verdict computes: its slot order and sampling seed, and when K collapses.

    repeat(3, pairwise=True, reasoning=False)             # Repeat(index=1, order='BA', seed=None)
    repeat(3, pairwise=True, reasoning=True, seed=7)      # Repeat(index=3, order='BA', seed=10)
    len(distinct_repeats(5, pairwise=True, reasoning=False))   # 2: K collapses to both slot orders

A pairwise repeat shows candidate a first ("AB") when r is even and b first ("BA") when r is
odd, so slot bias cancels. With sampled reasoning every repeat samples anew under ``seed + r``.
Without reasoning nothing else changes between repeats, so repeat r *is* repeat ``r % 2``
(pairwise) or repeat 0 (pointwise): K collapses to 2 or 1, and asking for a collapsed repeat
again is the same computation (a cache hit), never fresh evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

DISTINCT_SLOT_ORDERS = 2


@dataclass(frozen=True)
class Repeat:
    """One distinct computation of a verdict.

    ``index``: the repeat as computed and recorded. ``order``: "AB" (a shown first), "BA", or
    None for a pointwise score. ``seed``: the sampling seed with reasoning, else None.
    """

    index: int
    order: str | None
    seed: int | None


def repeat(r: int, *, pairwise: bool, reasoning: bool, seed: int = 0) -> Repeat:
    """The computation that repeat ``r`` (0, 1, 2, ...) stands for."""
    if reasoning:
        index = r
    else:
        index = r % DISTINCT_SLOT_ORDERS if pairwise else 0
    order = ("AB" if index % 2 == 0 else "BA") if pairwise else None
    return Repeat(index, order, seed + r if reasoning else None)


def distinct_repeat_count(asked: int, *, pairwise: bool, reasoning: bool) -> int:
    """How many different computations repeats ``0..asked-1`` are (no list is built: ``asked`` may be huge)."""
    if reasoning:
        return max(asked, 0)
    return min(max(asked, 0), DISTINCT_SLOT_ORDERS if pairwise else 1)


def distinct_repeats(asked: int, *, pairwise: bool, reasoning: bool, seed: int = 0) -> list[Repeat]:
    """The different computations among repeats ``0..asked-1``: fewer than ``asked`` when K collapses."""
    count = distinct_repeat_count(asked, pairwise=pairwise, reasoning=reasoning)
    return [repeat(r, pairwise=pairwise, reasoning=reasoning, seed=seed) for r in range(count)]
