"""Best-of-N selection from pairwise judgements: round robin, PPT, knockout, pointwise.

Every method takes the number of candidates and a judge ``judge(i, j, repeat) -> P(i ≻ j)``
(see ``veriscale.selection.judging``: ``i`` sits in slot A when ``repeat`` is even), fits
Bradley–Terry over all judgements, and returns a ``TournamentResult``::

    result = ppt(20, judge, k=4, seed=7)
    result.winner, result.confidence, result.n_comparisons   # n_comparisons = 20 + 4·16 + 6

Counting. A *comparison* is one scheduled meeting of two candidates; it is judged ``repeats``
times (each judgement is one judge call). ``n_comparisons`` counts comparisons, ``n_judgements``
judge calls, ``n_distinct_pairs`` unordered pairs that met at least once.

- ``round_robin``: every unordered pair is one comparison, judged ``repeats`` times (default 2:
  ``judge(i, j, 0)`` and ``judge(i, j, 1)``, i.e. both slot orders). N(N−1)/2 comparisons.
- ``ppt`` (Probabilistic Pivot Tournament): a ring pass over a seeded random cycle compares each
  candidate with its successor, so each is once in slot A and once in slot B (N comparisons);
  the top-k candidates by mean ring preference become pivots; then every non-pivot meets every
  pivot and the pivots meet each other (k(N−k) + k(k−1)/2 comparisons). A pair that already met
  in the ring is judged again in the pivot rounds, at its next repeat index (so in the other
  slot order): the total is exactly N + k(N−k) + k(k−1)/2 comparisons, as in the paper. The
  winner has the largest normalised win mass.
- ``knockout``: seeded single-elimination bracket, a bye for the last entrant of an odd round.
- ``pointwise``: argmax of a per-candidate ``score(i)``; no judge.

Adaptive mode (``round_robin`` and ``ppt``, ``adaptive=True``): rounds are played one at a time
(PPT: one pivot at a time, strongest pivot first; round robin: one circle-method round at a
time, each pair judged once) and play stops as soon as the Bradley–Terry confidence that the
leader is best reaches ``min_confidence``. Each scheduled comparison is judged once at first
(``repeats`` only sizes the non-adaptive plan the savings are measured against). If the plan
ends first, comparisons of the leader
whose mean preference is within ``close_margin`` of 0.5 get extra repeats (closest first) until
confident or every such pair has ``max_repeats`` judgements. ``judgements_saved`` is the
non-adaptive plan's judge calls minus those made (negative if the extra repeats cost more).

``groups`` (one id per candidate; equal ids = identical output): the tournament runs over one
representative per group; members share their representative's strength and score and are
reported as ties with it. Same ``seed``, same judge answers → same comparisons and result.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Callable, Hashable, Sequence

import numpy as np

from veriscale.errors import UserError
from veriscale.selection.bradley_terry import (
    DEFAULT_PRIOR,
    BradleyTerryFit,
    fit_bradley_terry,
    normalised_win_mass,
    ranking_by,
)
from veriscale.selection.groups import CandidateGroups, group_candidates
from veriscale.selection.judging import Judge, JudgeLedger, Judgement

Score = Callable[[int], float]
"""``score(i) -> reward`` of candidate ``i`` (for ``pointwise``)."""

DEFAULT_TIE_TOLERANCE = 0.02


@dataclass(frozen=True)
class TournamentResult:
    """Outcome of one selection; indices are the caller's candidate indices.

    ``ranking``: best first. ``strengths``: Bradley–Terry log-strengths (pointwise: centred
    scores). ``win_mass``: normalised win mass, sums to 1 (pointwise: share of others beaten).
    ``confidence``: posterior probability that ``winner`` is truly the best (None for
    pointwise). ``ties``: pairs whose mean preference is within the tie tolerance of 0.5, plus
    pairs of identical candidates. ``comparisons``: every judge call in order.
    ``stop_reason``: "plan complete", "confident", "max repeats" or "single candidate".
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

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (comparisons as ``{"i", "j", "repeat", "p"}`` objects)."""
        data = asdict(self)
        data["comparisons"] = [c._asdict() for c in self.comparisons]
        data["ties"] = [list(t) for t in self.ties]
        return data


def ppt_comparison_count(n: int, k: int) -> int:
    """Comparisons PPT schedules for ``n`` candidates and ``k`` pivots: N + k(N−k) + k(k−1)/2."""
    return 0 if n == 1 else n + k * (n - k) + k * (k - 1) // 2


def round_robin(
    n_candidates: int,
    judge: Judge,
    *,
    repeats: int = 2,
    adaptive: bool = False,
    min_confidence: float = 0.9,
    max_repeats: int = 4,
    close_margin: float = 0.2,
    groups: Sequence[Hashable] | None = None,
    seed: int = 0,
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE,
    prior: float = DEFAULT_PRIOR,
) -> TournamentResult:
    """Every pair meets; ``repeats`` judgements per pair (default 2 = both slot orders)."""
    _check_common(n_candidates, repeats, tie_tolerance)
    if adaptive:
        _check_adaptive(min_confidence, max_repeats, repeats, close_margin)
    grouped = group_candidates(n_candidates, groups)
    n = len(grouped.representatives)
    ledger = JudgeLedger(judge, list(grouped.representatives))
    rounds = _circle_rounds(n)
    planned = n * (n - 1) // 2 * repeats
    stop = "plan complete"
    fit: BradleyTerryFit | None = None
    if n > 1 and not adaptive:
        for pairs in rounds:
            for a, b in pairs:
                for _ in range(repeats):
                    ledger.judge_pair(a, b)
    elif n > 1:
        for pairs in rounds:
            for a, b in pairs:
                ledger.judge_pair(a, b)
            fit = _fit(n, ledger, prior, seed)
            if fit.confidence >= min_confidence:
                stop = "confident"
                break
        else:
            fit, stop = _extra_repeats(n, ledger, prior, seed, min_confidence, max_repeats, close_margin)
    if n == 1:
        stop = "single candidate"
    if fit is None:
        fit = _fit(n, ledger, prior, seed)
    return _bt_result(
        "round_robin", grouped, ledger, fit, n_comparisons=len(ledger.judged_pairs()), planned=planned,
        adaptive=adaptive, stop=stop, tie_tolerance=tie_tolerance,
    )


def ppt(
    n_candidates: int,
    judge: Judge,
    *,
    k: int = 3,
    repeats: int = 1,
    adaptive: bool = False,
    min_confidence: float = 0.9,
    max_repeats: int = 4,
    close_margin: float = 0.2,
    groups: Sequence[Hashable] | None = None,
    seed: int = 0,
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE,
    prior: float = DEFAULT_PRIOR,
) -> TournamentResult:
    """Probabilistic Pivot Tournament with ``k`` pivots (1 ≤ k ≤ number of candidates).

    With ``groups``, k is capped at the number of distinct outputs.
    """
    _check_common(n_candidates, repeats, tie_tolerance)
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= n_candidates:
        raise UserError(
            f"k={k!r} pivots is out of range for {n_candidates} candidates: pick k from 1 to {n_candidates}"
        )
    if adaptive:
        _check_adaptive(min_confidence, max_repeats, repeats, close_margin)
    grouped = group_candidates(n_candidates, groups)
    n = len(grouped.representatives)
    k = min(int(k), n)
    ledger = JudgeLedger(judge, list(grouped.representatives))
    planned = ppt_comparison_count(n, k) * repeats
    if n == 1:
        return _bt_result(
            "ppt", grouped, ledger, _fit(1, ledger, prior, seed), n_comparisons=0, planned=0,
            adaptive=adaptive, stop="single candidate", tie_tolerance=tie_tolerance, pivots=(0,),
        )
    rng = np.random.default_rng(seed)
    cycle = [int(c) for c in rng.permutation(n)]
    ring_preference: dict[int, list[float]] = {c: [] for c in cycle}
    for position, a in enumerate(cycle):
        b = cycle[(position + 1) % n]
        for _ in range(1 if adaptive else repeats):
            p = ledger.judge_pair(a, b)
            ring_preference[a].append(p)
            ring_preference[b].append(1.0 - p)
    mean_ring = {c: sum(v) / len(v) for c, v in ring_preference.items()}
    pivots = sorted(cycle, key=lambda c: (-mean_ring[c], c))[:k]
    pivot_set = set(pivots)
    others = [c for c in cycle if c not in pivot_set]

    n_comparisons = n
    stop = "plan complete"
    fit: BradleyTerryFit | None = None
    for s, pivot in enumerate(pivots):
        meetings = [_balanced(m, pivot, r + s) for r, m in enumerate(others)]
        meetings += [_balanced(pivot, earlier, s + t) for t, earlier in enumerate(pivots[:s])]
        for a, b in meetings:
            for _ in range(1 if adaptive else repeats):
                ledger.judge_pair(a, b)
        n_comparisons += len(meetings)
        if adaptive:
            fit = _fit(n, ledger, prior, seed)
            if fit.confidence >= min_confidence:
                stop = "confident"
                break
    if adaptive and stop != "confident":
        fit, stop = _extra_repeats(n, ledger, prior, seed, min_confidence, max_repeats, close_margin)
    fit = fit if adaptive else _fit(n, ledger, prior, seed)
    return _bt_result(
        "ppt", grouped, ledger, fit, n_comparisons=n_comparisons, planned=planned, adaptive=adaptive,
        stop=stop, tie_tolerance=tie_tolerance, pivots=tuple(pivots),
    )


def knockout(
    n_candidates: int,
    judge: Judge,
    *,
    repeats: int = 2,
    groups: Sequence[Hashable] | None = None,
    seed: int = 0,
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE,
    prior: float = DEFAULT_PRIOR,
) -> TournamentResult:
    """Seeded single-elimination bracket; each match judged ``repeats`` times (default: both slots).

    A match goes to the higher mean preference; an exact 0.5 is settled by a seeded coin. The
    ranking orders candidates by the round they fell in (later is better), then by strength.
    """
    _check_common(n_candidates, repeats, tie_tolerance)
    grouped = group_candidates(n_candidates, groups)
    n = len(grouped.representatives)
    ledger = JudgeLedger(judge, list(grouped.representatives))
    rng = np.random.default_rng(seed)
    entrants = [int(c) for c in rng.permutation(n)]
    survived = {c: 0 for c in entrants}
    round_number = 0
    while len(entrants) > 1:
        round_number += 1
        bye = [entrants.pop()] if len(entrants) % 2 else []
        winners = []
        for a, b in zip(entrants[0::2], entrants[1::2]):
            preference = sum(ledger.judge_pair(a, b) for _ in range(repeats)) / repeats
            a_wins = preference > 0.5 or (preference == 0.5 and rng.random() < 0.5)
            winners.append(a if a_wins else b)
        entrants = winners + bye
        for c in entrants:
            survived[c] = round_number
    fit = _fit(n, ledger, prior, seed)
    order = sorted(range(n), key=lambda c: (-survived[c], -fit.strengths[c], c))
    return _bt_result(
        "knockout", grouped, ledger, fit, n_comparisons=n - 1, planned=(n - 1) * repeats, adaptive=False,
        stop="single candidate" if n == 1 else "plan complete", tie_tolerance=tie_tolerance,
        local_ranking=tuple(order),
    )


def pointwise(
    n_candidates: int,
    score: Score,
    *,
    groups: Sequence[Hashable] | None = None,
    tie_tolerance: float = 1e-9,
) -> TournamentResult:
    """Pick the candidate with the highest ``score(i)``; candidates within ``tie_tolerance`` tie."""
    _check_common(n_candidates, 1, tie_tolerance)
    if not callable(score):
        raise UserError(f"score {score!r} is not callable: pass a function score(i) -> reward")
    grouped = group_candidates(n_candidates, groups)
    values = []
    for rep in grouped.representatives:
        raw = score(rep)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            raise UserError(f"score({rep}) returned {raw!r}: a score function must return a finite number")
        values.append(value)
    scores = np.asarray(values)
    ranking = ranking_by(scores)
    ties = [
        (a, b)
        for a, b in itertools.combinations(range(len(values)), 2)
        if abs(values[a] - values[b]) <= tie_tolerance
    ]
    expanded = _expand_values(grouped, scores)
    return TournamentResult(
        method="pointwise",
        winner=grouped.representatives[ranking[0]],
        ranking=_expand_ranking(grouped, ranking),
        strengths=tuple(float(v) for v in expanded - scores.mean()),
        win_mass=tuple(float(v) for v in _share_beaten(expanded, tie_tolerance)),
        confidence=None,
        ties=_expand_ties(grouped, ties),
        comparisons=(),
        n_comparisons=0,
        n_distinct_pairs=0,
        n_judgements=len(values),
        judgements_planned=len(values),
        judgements_saved=0,
    )


# ---------------------------------------------------------------- internals


def _check_common(n_candidates: int, repeats: int, tie_tolerance: float) -> None:
    if not isinstance(n_candidates, (int, np.integer)) or isinstance(n_candidates, bool) or n_candidates < 1:
        raise UserError(f"n_candidates={n_candidates!r}: selection needs at least one candidate, so pass N >= 1")
    if not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise UserError(f"repeats={repeats!r} must be a whole number >= 1 (2 judges each pair in both slot orders)")
    if not 0.0 <= tie_tolerance < 0.5:
        raise UserError(f"tie_tolerance={tie_tolerance!r} must be in [0, 0.5): e.g. 0.02 ties P within 0.48..0.52")


def _check_adaptive(min_confidence: float, max_repeats: int, repeats: int, close_margin: float) -> None:
    if not 0.0 < min_confidence <= 1.0:
        raise UserError(f"min_confidence={min_confidence!r} must be in (0, 1]: e.g. 0.9")
    if not isinstance(max_repeats, (int, np.integer)) or max_repeats < repeats:
        raise UserError(f"max_repeats={max_repeats!r} must be a whole number >= repeats ({repeats})")
    if not 0.0 <= close_margin <= 0.5:
        raise UserError(f"close_margin={close_margin!r} must be in [0, 0.5]: e.g. 0.2 re-judges P within 0.3..0.7")


def _fit(n: int, ledger: JudgeLedger, prior: float, seed: int) -> BradleyTerryFit:
    return fit_bradley_terry(n, ledger.outcomes(), prior=prior, seed=seed)


def _balanced(a: int, b: int, parity: int) -> tuple[int, int]:
    """Orientation for a new pair: alternate who takes slot A by ``parity``."""
    return (a, b) if parity % 2 == 0 else (b, a)


def _circle_rounds(n: int) -> list[list[tuple[int, int]]]:
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
                pairs.append(_balanced(low, high, low + high + 1))
        rounds.append(pairs)
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def _extra_repeats(
    n: int,
    ledger: JudgeLedger,
    prior: float,
    seed: int,
    min_confidence: float,
    max_repeats: int,
    close_margin: float,
) -> tuple[BradleyTerryFit, str]:
    """Re-judge the leader's close comparisons, closest first, until confident or out of repeats."""
    while True:
        fit = _fit(n, ledger, prior, seed)
        if fit.confidence >= min_confidence:
            return fit, "confident"
        leader = fit.leader
        close = []
        for a, b in ledger.judged_pairs():
            if leader not in (a, b) or ledger.repeats_done(a, b) >= max_repeats:
                continue
            other = b if a == leader else a
            gap = abs(ledger.mean_preference(leader, other) - 0.5)
            if gap < close_margin:
                close.append((gap, other))
        if not close:
            return fit, "max repeats"
        ledger.judge_pair(leader, min(close)[1])


def _bt_result(
    method: str,
    grouped: CandidateGroups,
    ledger: JudgeLedger,
    fit: BradleyTerryFit,
    *,
    n_comparisons: int,
    planned: int,
    adaptive: bool,
    stop: str,
    tie_tolerance: float,
    pivots: tuple[int, ...] = (),
    local_ranking: tuple[int, ...] | None = None,
) -> TournamentResult:
    ranking = local_ranking if local_ranking is not None else fit.ranking
    reps = grouped.representatives
    ties = [
        (min(a, b), max(a, b))
        for a, b in ledger.judged_pairs()
        if abs(ledger.mean_preference(a, b) - 0.5) < tie_tolerance
    ]
    expanded = _expand_values(grouped, fit.strengths)
    n_judgements = len(ledger.judgements)
    return TournamentResult(
        method=method,
        winner=reps[ranking[0]],
        ranking=_expand_ranking(grouped, ranking),
        strengths=tuple(float(v) for v in expanded),
        win_mass=tuple(float(v) for v in normalised_win_mass(expanded)),
        confidence=float(fit.prob_best[ranking[0]]),
        ties=_expand_ties(grouped, sorted(ties)),
        comparisons=tuple(Judgement(reps[c.i], reps[c.j], c.repeat, c.p) for c in ledger.judgements),
        n_comparisons=n_comparisons,
        n_distinct_pairs=len(ledger.judged_pairs()),
        n_judgements=n_judgements,
        judgements_planned=planned,
        judgements_saved=planned - n_judgements if adaptive else 0,
        adaptive=adaptive,
        pivots=tuple(reps[p] for p in pivots),
        stop_reason=stop,
    )


def _expand_values(grouped: CandidateGroups, local_values: np.ndarray) -> np.ndarray:
    """Give every member its representative's value."""
    values = np.empty(grouped.n_candidates)
    for local, members in enumerate(grouped.members):
        values[list(members)] = local_values[local]
    return values


def _expand_ranking(grouped: CandidateGroups, local_ranking: Sequence[int]) -> tuple[int, ...]:
    return tuple(member for local in local_ranking for member in grouped.members[local])


def _expand_ties(grouped: CandidateGroups, local_ties: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Map ties between representatives to all their members; members of a group tie each other."""
    pairs = set()
    for a, b in local_ties:
        pairs.update((min(x, y), max(x, y)) for x in grouped.members[a] for y in grouped.members[b])
    for members in grouped.members:
        pairs.update(itertools.combinations(members, 2))
    return tuple(sorted(pairs))


def _share_beaten(values: np.ndarray, tie_tolerance: float) -> np.ndarray:
    """Pointwise win mass: share of others each candidate beats (ties count half), summing to 1."""
    n = values.size
    if n == 1:
        return np.ones(1)
    gap = values[:, None] - values[None, :]
    beats = np.where(np.abs(gap) <= tie_tolerance, 0.5, (gap > 0).astype(float))
    mean = (beats.sum(axis=1) - 0.5) / (n - 1)
    return mean / mean.sum()
