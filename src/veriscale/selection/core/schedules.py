"""Who meets whom: the tournaments' pair schedules as pure functions (no judge, no fit).

    cycle = shuffled(5, np.random.default_rng(0))    # a seeded random order: [2, 4, 3, 0, 1]
    ring_pairs(cycle)                                # each with its successor: N pairs
    pivot_rounds([3, 1], others=[4, 2, 0])           # per pivot: it meets every non-pivot and earlier pivots
    pivot_first_rounds([3, 1], [4, 2, 0], slot_a_next)   # the same meetings, each pivot shown first
    circle_rounds(4)                                 # 3 rounds, every pair once, nobody twice in a round
    pair_up([5, 1, 3])                               # ([(5, 1)], [3]): the last of an odd round has a bye
    ppt_comparison_count(20, 4)                      # 90 = 20 + 4·16 + 4·3/2

A pair ``(a, b)`` puts ``a`` in slot A the first time the pair is judged; the schedules
alternate that orientation so every candidate takes slot A about half the time, except
``pivot_first_rounds``, which shows each pivot first so its text is a shared KV prefix.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

Pair = tuple[int, int]


def ppt_comparison_count(n: int, k: int) -> int:
    """Comparisons PPT schedules for ``n`` candidates and ``k`` pivots: N + k(N−k) + k(k−1)/2."""
    return 0 if n == 1 else n + k * (n - k) + k * (k - 1) // 2


def shuffled(n: int, rng: np.random.Generator) -> list[int]:
    """``0..n-1`` in the generator's random order (the PPT ring, the knockout bracket)."""
    return [int(c) for c in rng.permutation(n)]


def ring_pairs(cycle: Sequence[int]) -> list[Pair]:
    """Each candidate of the cycle with its successor: once in slot A, once in slot B."""
    return [(a, cycle[(position + 1) % len(cycle)]) for position, a in enumerate(cycle)]


def choose_pivots(cycle: Sequence[int], mean_preference: Mapping[int, float], k: int) -> list[int]:
    """The ``k`` ring leaders by mean preference, strongest first (ties: lower index)."""
    return sorted(cycle, key=lambda c: (-mean_preference[c], c))[:k]


def pivot_rounds(pivots: Sequence[int], others: Sequence[int]) -> list[list[Pair]]:
    """One round per pivot, in order: it meets every non-pivot, then the pivots before it."""
    rounds = []
    for s, pivot in enumerate(pivots):
        meetings = [balanced(m, pivot, r + s) for r, m in enumerate(others)]
        meetings += [balanced(pivot, earlier, s + t) for t, earlier in enumerate(pivots[:s])]
        rounds.append(meetings)
    return rounds


def pivot_first_rounds(pivots: Sequence[int], others: Sequence[int],
                       slot_a_next: Callable[[int, int], int | None]) -> list[list[Pair]]:
    """:func:`pivot_rounds` with each pivot shown first (slot A), its own meetings played in a row.

    A prompt shows the first response before the second, so a pivot's text is then the prompt
    prefix its meetings share and the model's KV cache evaluates it once per round, not once per
    meeting. ``slot_a_next(a, b)`` says who takes slot A when the pair is judged next (None for
    a pair not judged yet); a pair the ring already judged with the pivot first is judged again in
    the other slot order (the other candidate first), so those meetings come last in the round.
    Slot bias then no longer cancels within a pivot round, but every pivot meets the same
    non-pivots from the same slot, so comparisons between pivots stay even.
    """
    rounds = []
    for s, pivot in enumerate(pivots):
        meetings = [(pivot, m) for m in others] + [(pivot, earlier) for earlier in pivots[:s]]
        shown_first = [pair for pair in meetings if slot_a_next(*pair) in (None, pivot)]
        rounds.append(shown_first + [pair for pair in meetings if pair not in shown_first])
    return rounds


def circle_rounds(n: int) -> list[list[Pair]]:
    """Round-robin schedule (circle method): every pair once, each item at most once per round.

    Orientation alternates with ``a + b`` parity so each item is in slot A about half the time.
    """
    players: list[int | None] = list(range(n)) + ([None] if n % 2 else [])
    m = len(players)
    rounds = []
    for _ in range(m - 1):
        pairs = []
        for t in range(m // 2):
            a, b = players[t], players[m - 1 - t]
            if a is not None and b is not None:
                low, high = min(a, b), max(a, b)
                pairs.append(balanced(low, high, low + high + 1))
        rounds.append(pairs)
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def pair_up(entrants: Sequence[int]) -> tuple[list[Pair], list[int]]:
    """A knockout round: neighbours meet; an odd round's last entrant gets a bye."""
    entrants = list(entrants)
    bye = [entrants.pop()] if len(entrants) % 2 else []
    return list(zip(entrants[0::2], entrants[1::2])), bye


def balanced(a: int, b: int, parity: int) -> Pair:
    """Orientation for a new pair: alternate who takes slot A by ``parity``."""
    return (a, b) if parity % 2 == 0 else (b, a)
