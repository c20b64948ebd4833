"""From judgements to a ``TournamentResult``: the Bradley–Terry aggregation and group expansion.

    fit = fit_bradley_terry(n, ledger.outcomes())
    result = bradley_terry_result("ppt", grouped, ledger, fit, n_comparisons=12, planned=12)
    result.winner, result.ranking, result.confidence

Tournaments run over one representative per group of identical candidates (local indices);
here every member gets its representative's strength and win mass, members tie each other,
and judgements are reported in the caller's candidate indices.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from veriscale.selection.core.bradley_terry import BradleyTerryFit, normalised_win_mass, ranking_by
from veriscale.selection.core.groups import CandidateGroups
from veriscale.selection.core.judging import Judgement, PairBook, Scored


@dataclass(frozen=True)
class TournamentResult:
    """Outcome of one selection; indices are the caller's candidate indices.

    ``ranking``: best first. ``strengths``: Bradley–Terry log-strengths (pointwise: centred
    scores). ``win_mass``: normalised win mass, sums to 1 (pointwise: share of others beaten).
    ``confidence``: posterior probability that ``winner`` is truly the best (None for
    pointwise). ``ties``: pairs whose mean preference is within the tie tolerance of 0.5, plus
    pairs of identical candidates. ``comparisons``: every judge call in order, with the rewards
    the judge gave; ``scores``: every pointwise score. ``stop_reason``: "plan complete",
    "confident", "max repeats" or "single candidate".
    """

    method: str
    winner: int
    ranking: tuple[int, ...]
    strengths: tuple[float, ...]
    win_mass: tuple[float, ...]
    confidence: float | None
    ties: tuple[tuple[int, int], ...]
    comparisons: tuple[Judgement, ...]
    n_comparisons: int
    n_distinct_pairs: int
    n_judgements: int
    judgements_planned: int
    judgements_saved: int
    adaptive: bool = False
    pivots: tuple[int, ...] = ()
    stop_reason: str = "plan complete"
    scores: tuple[Scored, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (comparisons as ``{"i", "j", "repeat", "p"}`` objects, plus their rewards)."""
        data = asdict(self)
        data["comparisons"] = [c.to_dict() for c in self.comparisons]
        data["scores"] = [s._asdict() for s in self.scores]
        data["ties"] = [list(t) for t in self.ties]
        return data


def bradley_terry_result(
    method: str,
    grouped: CandidateGroups,
    ledger: PairBook,
    fit: BradleyTerryFit,
    *,
    n_comparisons: int,
    planned: int,
    adaptive: bool = False,
    stop: str = "plan complete",
    tie_tolerance: float,
    pivots: tuple[int, ...] = (),
    local_ranking: tuple[int, ...] | None = None,
) -> TournamentResult:
    """The result of a judged tournament; ``local_ranking`` overrides the fit's order (knockout)."""
    ranking = local_ranking if local_ranking is not None else fit.ranking
    reps = grouped.representatives
    ties = [
        (min(a, b), max(a, b))
        for a, b in ledger.judged_pairs()
        if abs(_met_preference(ledger, a, b) - 0.5) < tie_tolerance
    ]
    expanded = expand_values(grouped, fit.strengths)
    n_judgements = len(ledger.judgements)
    return TournamentResult(
        method=method,
        winner=reps[ranking[0]],
        ranking=expand_ranking(grouped, ranking),
        strengths=tuple(float(v) for v in expanded),
        win_mass=tuple(float(v) for v in normalised_win_mass(expanded)),
        confidence=float(fit.prob_best[ranking[0]]),
        ties=expand_ties(grouped, sorted(ties)),
        comparisons=tuple(c._replace(i=reps[c.i], j=reps[c.j]) for c in ledger.judgements),
        n_comparisons=n_comparisons,
        n_distinct_pairs=len(ledger.judged_pairs()),
        n_judgements=n_judgements,
        judgements_planned=planned,
        judgements_saved=planned - n_judgements if adaptive else 0,
        adaptive=adaptive,
        pivots=tuple(reps[p] for p in pivots),
        stop_reason=stop,
    )


def pointwise_result(grouped: CandidateGroups, scored: Sequence[Scored], tie_tolerance: float) -> TournamentResult:
    """The argmax of one score per representative; candidates within ``tie_tolerance`` tie."""
    values = [s.reward for s in scored]
    scores = np.asarray(values)
    ranking = ranking_by(scores)
    ties = [
        (a, b)
        for a, b in itertools.combinations(range(len(values)), 2)
        if abs(values[a] - values[b]) <= tie_tolerance
    ]
    expanded = expand_values(grouped, scores)
    return TournamentResult(
        method="pointwise",
        winner=grouped.representatives[ranking[0]],
        ranking=expand_ranking(grouped, ranking),
        strengths=tuple(float(v) for v in expanded - scores.mean()),
        win_mass=tuple(float(v) for v in share_beaten(expanded, tie_tolerance)),
        confidence=None,
        ties=expand_ties(grouped, ties),
        comparisons=(),
        n_comparisons=0,
        n_distinct_pairs=0,
        n_judgements=len(values),
        judgements_planned=len(values),
        judgements_saved=0,
        scores=tuple(scored),
    )


def _met_preference(ledger: PairBook, a: int, b: int) -> float:
    """Mean ``P(a ≻ b)`` of a pair the ledger lists as judged (so it has one)."""
    preference = ledger.mean_preference(a, b)
    assert preference is not None, (a, b)
    return preference


def expand_values(grouped: CandidateGroups, local_values: np.ndarray) -> np.ndarray:
    """Give every member its representative's value."""
    values = np.empty(grouped.n_candidates)
    for local, members in enumerate(grouped.members):
        values[list(members)] = local_values[local]
    return values


def expand_ranking(grouped: CandidateGroups, local_ranking: Sequence[int]) -> tuple[int, ...]:
    """Each representative's place taken by all its members, lowest index first."""
    return tuple(member for local in local_ranking for member in grouped.members[local])


def expand_ties(grouped: CandidateGroups, local_ties: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Map ties between representatives to all their members; members of a group tie each other."""
    pairs: set[tuple[int, int]] = set()
    for a, b in local_ties:
        pairs.update((min(x, y), max(x, y)) for x in grouped.members[a] for y in grouped.members[b])
    for members in grouped.members:
        pairs.update(itertools.combinations(members, 2))
    return tuple(sorted(pairs))


def share_beaten(values: np.ndarray, tie_tolerance: float) -> np.ndarray:
    """Pointwise win mass: share of others each candidate beats (ties count half), summing to 1."""
    n = values.size
    if n == 1:
        return np.ones(1)
    gap = values[:, None] - values[None, :]
    beats = np.where(np.abs(gap) <= tie_tolerance, 0.5, (gap > 0).astype(float))
    mean = (beats.sum(axis=1) - 0.5) / (n - 1)
    shares: np.ndarray = mean / mean.sum()
    return shares
