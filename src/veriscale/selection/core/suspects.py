"""What a selection does with candidates the injection detector suspects (``injection_policy``).

    ranking, note = apply_policy((2, 0, 1), ties=((2, 0),), suspected={2}, policy="lose_ties")
    ranking          # (0, 2, 1): the suspect loses its tie with candidate 0, which is now the pick

``none`` (the default) only reports the flags. ``lose_ties``: a suspect ranked just above a
candidate it is tied with (the tournament's ``ties``) moves below it, as often as that applies.
``exclude``: suspects go to the end of the ranking, so the pick is the best unsuspected candidate
(when every candidate is suspected, the ranking stays as judged and a note says so).
"""

from __future__ import annotations

from typing import Iterable


def apply_policy(ranking: Iterable[int], *, ties: Iterable[tuple[int, int]], suspected: set[int],
                 policy: str, ids: list[str] | None = None) -> tuple[tuple[int, ...], str | None]:
    """The ranking under ``policy``, and a note when it changed the pick (or could not apply);
    ``ids`` name the candidates in the note (default: their indices)."""
    order = list(ranking)
    before = order[0] if order else None
    if policy == "lose_ties" and suspected:
        tied = {frozenset(t) for t in ties}
        moved = True
        while moved:
            moved = False
            for k in range(len(order) - 1):
                a, b = order[k], order[k + 1]
                if a in suspected and b not in suspected and frozenset((a, b)) in tied:
                    order[k], order[k + 1] = b, a
                    moved = True
    elif policy == "exclude" and suspected:
        if all(i in suspected for i in order):
            return tuple(order), "injection policy exclude: every candidate is suspected, so none was excluded"
        order = [i for i in order if i not in suspected] + [i for i in order if i in suspected]
    if order and order[0] != before:
        name = (lambda i: ids[i]) if ids else str
        return tuple(order), (f"injection policy {policy}: candidate {name(before)} is suspected of injection "
                              f"(see its injection span), so candidate {name(order[0])} is picked instead")
    return tuple(order), None
