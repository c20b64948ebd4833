"""Identical candidates are judged once: one representative per group of equal outputs.

``groups[i]`` is any hashable id; candidates with equal ids produced the same final output. The
representative of a group is its lowest-indexed member::

    g = group_candidates(5, ["x", "y", "x", "z", "y"])
    g.representatives   # (0, 1, 3)
    g.members           # ((0, 2), (1, 4), (3,))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence

from veriscale.errors import UserError


@dataclass(frozen=True)
class CandidateGroups:
    """Representatives (original indices) and, for each, all members of its group."""

    n_candidates: int
    representatives: tuple[int, ...]
    members: tuple[tuple[int, ...], ...]

    @property
    def trivial(self) -> bool:
        """True when every candidate is its own group."""
        return len(self.representatives) == self.n_candidates


def group_candidates(n_candidates: int, groups: Sequence[Hashable] | None) -> CandidateGroups:
    """Group candidate indices ``0..n_candidates-1`` by ``groups`` (None: all distinct)."""
    if groups is None:
        return CandidateGroups(n_candidates, tuple(range(n_candidates)), tuple((i,) for i in range(n_candidates)))
    groups = list(groups)
    if len(groups) != n_candidates:
        raise UserError(
            f"groups has {len(groups)} ids for {n_candidates} candidates: give one group id per candidate"
        )
    by_id: dict[Hashable, list[int]] = {}
    for index, group_id in enumerate(groups):
        try:
            by_id.setdefault(group_id, []).append(index)
        except TypeError:
            raise UserError(f"group id {group_id!r} of candidate {index} is not hashable: use a str or int") from None
    members = tuple(tuple(m) for m in by_id.values())
    return CandidateGroups(n_candidates, tuple(m[0] for m in members), members)
