"""Best-of-N selection from pairwise judgements: round robin, PPT, knockout, pointwise.

Every method takes the number of candidates and a judge ``judge(i, j, repeat) -> P(i ≻ j)``
(see ``veriscale.selection.core.judging``: ``i`` sits in slot A when ``repeat`` is even), fits
Bradley–Terry over all judgements, and returns a ``TournamentResult``::

    result = ppt(20, judge, k=4, seed=7)
    result.winner, result.confidence, result.n_comparisons   # n_comparisons = 20 + 4·16 + 6

Counting. A *comparison* is one scheduled meeting of two candidates; it is judged ``repeats``
times (each judgement is one judge call). ``n_comparisons`` counts comparisons, ``n_judgements``
judge calls, ``n_distinct_pairs`` unordered pairs that met at least once. Who meets whom is in
``veriscale.selection.core.schedules``; adaptive play in ``veriscale.selection.core.adaptive``.

- ``round_robin``: every unordered pair is one comparison, judged ``repeats`` times (default 2:
  ``judge(i, j, 0)`` and ``judge(i, j, 1)``, i.e. both slot orders). N(N−1)/2 comparisons.
- ``ppt`` (Probabilistic Pivot Tournament): a ring pass over a seeded random cycle compares each
  candidate with its successor, so each is once in slot A and once in slot B (N comparisons);
  the top-k candidates by mean ring preference become pivots; then every non-pivot meets every
  pivot and the pivots meet each other (k(N−k) + k(k−1)/2 comparisons). A pair that already met
  in the ring is judged again in the pivot rounds, at its next repeat index (so in the other
  slot order): the total is exactly N + k(N−k) + k(k−1)/2 comparisons, as in the paper. The
  winner has the largest normalised win mass. In its round a pivot is shown first (a re-judged
  ring pair keeps its other slot order) and its meetings run in a row, so its text is the prompt
  prefix they share and a KV cache evaluates it once per round (``pivot_first=False``: the
  orientation alternates, as before).
- ``knockout``: seeded single-elimination bracket, a bye for the last entrant of an odd round.
- ``pointwise``: argmax of a per-candidate ``score(i)``; no judge.

Adaptive mode (``round_robin`` and ``ppt``, ``adaptive=True``): rounds are played one at a time
(PPT: one pivot at a time, strongest pivot first; round robin: one circle-method round at a
time, each pair judged once) and play stops as soon as the Bradley–Terry confidence that the
leader is best reaches ``min_confidence``. Each scheduled comparison is judged once at first
(``repeats`` only sizes the non-adaptive plan the savings are measured against). If the plan
ends first, comparisons of the leader whose mean preference is within ``close_margin`` of 0.5
get extra repeats (closest first) until confident or every such pair has ``max_repeats``
judgements. ``judgements_saved`` is the non-adaptive plan's judge calls minus those made
(negative if the extra repeats cost more).

``groups`` (one id per candidate; equal ids = identical output): the tournament runs over one
representative per group; members share their representative's strength and score and are
reported as ties with it. Same ``seed``, same judge answers → same comparisons and result.

Async forms (``appt``, ``around_robin``, ``aknockout``, ``apointwise``) take an async judge
``async def judge(i, j, repeat) -> P`` (or ``PairVerdict``; ``apointwise``: ``async def score(i)``)
and judge each round's meetings concurrently: PPT's ring, each pivot round, each circle-method
round, each knockout round, all pointwise scores. A pair's repeats stay in turn, and judgements
are recorded in the schedule's order, so the result is the one the sync form gives for the same
answers (adaptive stops included)::

    result = await appt(20, ajudge, k=4, seed=7)

The sync forms are thin wrappers: they mark the judge as synchronous
(``judging.SyncJudge``) and run the same async code with ``judging.run_inline``, without an
event loop and one call at a time in the order they always used, so they still work from any
thread (and a judge that blocks on the gateway's loop is fine).
"""

from __future__ import annotations

import math
import inspect
from typing import Any, Awaitable, Callable, Hashable, Sequence, Unpack

import numpy as np

from veriscale.errors import UserError
from veriscale.selection.core.adaptive import aplay_adaptively, aplay_all
from veriscale.selection.core.aggregate import TournamentResult, bradley_terry_result, pointwise_result
from veriscale.selection.core.bradley_terry import BradleyTerryFit, fit_bradley_terry
from veriscale.selection.core.groups import group_candidates
from veriscale.selection.core.options import BracketKnobs, TournamentKnobs, TournamentOptions
from veriscale.selection.core.judging import (
    AsyncJudge,
    InOrder,
    Judge,
    JudgeLedger,
    Scored,
    ScoreVerdict,
    SyncJudge,
    all_or_cancel,
    run_inline,
)
from veriscale.selection.core.schedules import (
    choose_pivots,
    circle_rounds,
    pair_up,
    pivot_first_rounds,
    pivot_rounds,
    ppt_comparison_count,
    ring_pairs,
    shuffled,
)

Score = Callable[[int], "float | ScoreVerdict"]
"""``score(i) -> reward`` of candidate ``i`` (for ``pointwise``), or a ``ScoreVerdict`` with per-criterion rewards."""

AsyncScore = Callable[[int], Awaitable["float | ScoreVerdict"]]
"""``await score(i) -> reward`` (for ``apointwise``)."""


__all__ = ["AsyncScore", "Score", "TournamentResult", "aknockout", "apointwise", "appt", "around_robin", "knockout",
           "pointwise", "ppt", "ppt_comparison_count", "round_robin"]


def round_robin(n_candidates: int, judge: Judge, *, repeats: int = 2,
                **knobs: Unpack[TournamentKnobs]) -> TournamentResult:
    """Every pair meets; ``repeats`` judgements per pair (default 2 = both slot orders)."""
    return run_inline(around_robin(n_candidates, SyncJudge(judge), repeats=repeats, **knobs))


async def around_robin(n_candidates: int, judge: AsyncJudge, *, repeats: int = 2,
                       **knobs: Unpack[TournamentKnobs]) -> TournamentResult:
    """:func:`round_robin` with an async judge; each circle-method round's pairs are judged concurrently."""
    o = TournamentOptions(**knobs)
    adaptive, tie_tolerance = o.adaptive, o.tie_tolerance
    _check_common(n_candidates, repeats, tie_tolerance)
    stop_rule = o.stop_rule(repeats)
    grouped = group_candidates(n_candidates, o.groups)
    n = len(grouped.representatives)
    ledger = JudgeLedger.for_judge(judge, list(grouped.representatives))
    refit = _refit(n, ledger, o.prior, o.seed)
    rounds = circle_rounds(n)
    stop = "plan complete"
    fit: BradleyTerryFit | None = None
    if n == 1:
        stop = "single candidate"
    elif adaptive:
        fit, stop, _ = await aplay_adaptively(rounds, ledger, stop_rule, refit)
    else:
        await aplay_all(rounds, ledger, repeats)
    return bradley_terry_result(
        "round_robin", grouped, ledger, fit or refit(), n_comparisons=len(ledger.judged_pairs()),
        planned=n * (n - 1) // 2 * repeats, adaptive=adaptive, stop=stop, tie_tolerance=tie_tolerance,
    )


def ppt(n_candidates: int, judge: Judge, *, k: int = 3, repeats: int = 1, pivot_first: bool = True,
        **knobs: Unpack[TournamentKnobs]) -> TournamentResult:
    """Probabilistic Pivot Tournament with ``k`` pivots (1 ≤ k ≤ number of candidates).

    With ``groups``, k is capped at the number of distinct outputs. ``pivot_first``: a pivot
    is shown first in its meetings, played in a row, so its text is their shared prompt prefix
    (``schedules.pivot_first_rounds``); False alternates who is shown first (``pivot_rounds``).
    """
    return run_inline(appt(n_candidates, SyncJudge(judge), k=k, repeats=repeats, pivot_first=pivot_first, **knobs))


async def appt(n_candidates: int, judge: AsyncJudge, *, k: int = 3, repeats: int = 1, pivot_first: bool = True,
               **knobs: Unpack[TournamentKnobs]) -> TournamentResult:
    """:func:`ppt` with an async judge: the ring is one concurrent round, then each pivot's round."""
    o = TournamentOptions(**knobs)
    adaptive, tie_tolerance = o.adaptive, o.tie_tolerance
    _check_common(n_candidates, repeats, tie_tolerance)
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= n_candidates:
        raise UserError(
            f"k={k!r} pivots is out of range for {n_candidates} candidates: pick k from 1 to {n_candidates}"
        )
    stop_rule = o.stop_rule(repeats)
    grouped = group_candidates(n_candidates, o.groups)
    n = len(grouped.representatives)
    k = min(int(k), n)
    ledger = JudgeLedger.for_judge(judge, list(grouped.representatives))
    refit = _refit(n, ledger, o.prior, o.seed)
    if n == 1:
        return bradley_terry_result(
            "ppt", grouped, ledger, refit(), n_comparisons=0, planned=0, adaptive=adaptive,
            stop="single candidate", tie_tolerance=tie_tolerance, pivots=(0,),
        )
    per_meeting = 1 if adaptive else repeats
    cycle = shuffled(n, np.random.default_rng(o.seed))
    ring_preference: dict[int, list[float]] = {c: [] for c in cycle}
    ring = ring_pairs(cycle)
    for (a, b), preferences in zip(ring, await ledger.aplay(ring, per_meeting)):
        for p in preferences:
            ring_preference[a].append(p)
            ring_preference[b].append(1.0 - p)
    pivots = choose_pivots(cycle, {c: sum(v) / len(v) for c, v in ring_preference.items()}, k)
    pivot_set = set(pivots)
    others = [c for c in cycle if c not in pivot_set]
    rounds = (pivot_first_rounds(pivots, others, ledger.slot_a_next) if pivot_first
              else pivot_rounds(pivots, others))

    stop = "plan complete"
    if adaptive:
        fit, stop, played = await aplay_adaptively(rounds, ledger, stop_rule, refit)
    else:
        await aplay_all(rounds, ledger, per_meeting)
        fit, played = refit(), len(rounds)
    return bradley_terry_result(
        "ppt", grouped, ledger, fit, n_comparisons=n + sum(len(r) for r in rounds[:played]),
        planned=ppt_comparison_count(n, k) * repeats, adaptive=adaptive, stop=stop,
        tie_tolerance=tie_tolerance, pivots=tuple(pivots),
    )


def knockout(n_candidates: int, judge: Judge, *, repeats: int = 2, **knobs: Unpack[BracketKnobs]) -> TournamentResult:
    """Seeded single-elimination bracket; each match judged ``repeats`` times (default: both slots).

    A match goes to the higher mean preference; an exact 0.5 is settled by a seeded coin. The
    ranking orders candidates by the round they fell in (later is better), then by strength.
    """
    return run_inline(aknockout(n_candidates, SyncJudge(judge), repeats=repeats, **knobs))


async def aknockout(n_candidates: int, judge: AsyncJudge, *, repeats: int = 2,
                    **knobs: Unpack[BracketKnobs]) -> TournamentResult:
    """:func:`knockout` with an async judge: each bracket round's matches are judged concurrently
    (the coins of exact ties are tossed afterwards, in match order, as the sync form tosses them)."""
    o = TournamentOptions(**knobs)
    tie_tolerance = o.tie_tolerance
    _check_common(n_candidates, repeats, tie_tolerance)
    grouped = group_candidates(n_candidates, o.groups)
    n = len(grouped.representatives)
    ledger = JudgeLedger.for_judge(judge, list(grouped.representatives))
    rng = np.random.default_rng(o.seed)
    entrants = shuffled(n, rng)
    survived = {c: 0 for c in entrants}
    round_number = 0
    while len(entrants) > 1:
        round_number += 1
        matches, bye = pair_up(entrants)
        winners = []
        for (a, b), preferences in zip(matches, await ledger.aplay(matches, repeats)):
            preference = sum(preferences) / repeats
            a_wins = preference > 0.5 or (preference == 0.5 and rng.random() < 0.5)
            winners.append(a if a_wins else b)
        entrants = winners + bye
        for c in entrants:
            survived[c] = round_number
    fit = _refit(n, ledger, o.prior, o.seed)()
    order = sorted(range(n), key=lambda c: (-survived[c], -fit.strengths[c], c))
    return bradley_terry_result(
        "knockout", grouped, ledger, fit, n_comparisons=n - 1, planned=(n - 1) * repeats,
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
    if not callable(score):
        _check_common(n_candidates, 1, tie_tolerance)
        raise UserError(f"score {score!r} is not callable: pass a function score(i) -> reward")
    return run_inline(apointwise(n_candidates, SyncJudge(score), groups=groups, tie_tolerance=tie_tolerance))


async def apointwise(
    n_candidates: int,
    score: AsyncScore,
    *,
    groups: Sequence[Hashable] | None = None,
    tie_tolerance: float = 1e-9,
) -> TournamentResult:
    """:func:`pointwise` with an async ``score(i)``; every distinct candidate is scored concurrently."""
    _check_common(n_candidates, 1, tie_tolerance)
    if not callable(score.judge if isinstance(score, SyncJudge) else score):
        raise UserError(f"score {score!r} is not callable: pass a function score(i) -> reward")
    grouped = group_candidates(n_candidates, groups)
    reps = list(grouped.representatives)
    if isinstance(score, (SyncJudge, InOrder)):
        answers = [await _score_of(score, rep) for rep in reps]
    else:
        answers = await all_or_cancel(_score_of(score, rep) for rep in reps)
    scored = []
    for rep, answer in zip(reps, answers):
        raw, rewards = (answer.reward, answer.rewards) if isinstance(answer, ScoreVerdict) else (answer, None)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            raise UserError(f"score({rep}) returned {raw!r}: a score function must return a finite number")
        scored.append(Scored(rep, value, rewards))
    return pointwise_result(grouped, scored, tie_tolerance)


async def _score_of(score: Callable[[int], Any], rep: int) -> Any:
    """``score(rep)``, awaited when it gives an awaitable (a sync score must not: see ``judging.answer_of``)."""
    answer = score(rep)
    if inspect.isawaitable(answer):
        if isinstance(score, SyncJudge):
            if inspect.iscoroutine(answer):
                answer.close()
            raise UserError(f"score {score.judge!r} is async: await apointwise instead of calling pointwise")
        answer = await answer
    return answer


def _check_common(n_candidates: int, repeats: int, tie_tolerance: float) -> None:
    if not isinstance(n_candidates, (int, np.integer)) or isinstance(n_candidates, bool) or n_candidates < 1:
        raise UserError(f"n_candidates={n_candidates!r}: selection needs at least one candidate, so pass N >= 1")
    if not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise UserError(f"repeats={repeats!r} must be a whole number >= 1 (2 judges each pair in both slot orders)")
    if not 0.0 <= tie_tolerance < 0.5:
        raise UserError(f"tie_tolerance={tie_tolerance!r} must be in [0, 0.5): e.g. 0.02 ties P within 0.48..0.52")


def _refit(n: int, ledger: JudgeLedger, prior: float, seed: int) -> Callable[[], BradleyTerryFit]:
    """Bradley–Terry over the ledger's judgements so far, as a function to call after each round."""
    return lambda: fit_bradley_terry(n, ledger.outcomes(), prior=prior, seed=seed)
