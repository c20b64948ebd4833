"""The cost controller: one decision inside a budget of model calls or prompt tokens.

    budget = parse_budget("calls=60")                       # or "tokens=40000"
    outcome = BudgetController(budget, seed=3).run(n, judge, groups=groups)
    outcome.result.winner, outcome.spent, [step.to_dict() for step in outcome.steps]

``judge`` is a :class:`CostedJudge`: ``judge(i, j, repeat, level)`` returns ``P(i ≻ j)`` (``i``
in slot A on even repeats) judged on criteria level ``level`` (0: the first criterion alone,
the cheap screen; 1: every criterion), and ``judge.cost(i, j, repeat, level)`` what that
judgement would spend, in calls and prompt tokens, read from the verifier's own plan of the
calls (a call the store already holds costs nothing: cache hits never count against the
budget). The controller never starts a judgement it cannot pay for, so it spends at most the
budget, exactly counted.

Planning C: when the budget pays for PPT with one pivot on every criterion (2N − 1
comparisons), every step judges all criteria; otherwise the steps screen on the first criterion
and the others come last, for the top pair only. Escalation, each step recorded (what was
added, why, budget spent and left, confidence after):

1. **ring**: a seeded ring, each candidate against its successor (N comparisons);
2. **pivot** (k): the strongest candidate still in contention (posterior P(best) at least
   ``contention``, and always the top two) meets every other contender it has not met;
3. **repeat** (K): contender pairs whose preference is within ``close_margin`` of 0.5 are
   judged again in the other slot order;
4. **criteria** (C): the top pair (the leader and the runner-up) is judged on every criterion,
   in both slot orders; then the leader against the next contender.

Before the ring, :meth:`BudgetController.plan_scale` plans G, the scale's granularity
(:mod:`veriscale.selection.budget.scale`): the user's G, lowered only to what the backend can
read in one call or where a tokens budget cannot pay for one comparison at it; recorded as the
first step ("granularity", no calls). K, C and k are the steps below.

When no step is left among the contenders, contention widens to every candidate. Play stops
once Bradley–Terry's confidence in the leader reaches ``min_confidence`` ("confident"), when
no step fits in what is left ("budget spent"), or when nothing is left to judge.
Same seed and same judge answers give the same steps and pick. A budget smaller than the first
comparison is refused before any call, naming the smallest budget that works.

``await BudgetController(budget).arun(n, ajudge)`` takes a judge whose ``__call__`` is async
(``cost`` stays synchronous). Its judgements are still made one at a time: each is priced
against what is left after the one before, and a judgement can make the next one's calls cache
hits, so playing a step's actions at once could spend differently. ``run`` is the same code with
the judge called inline (``veriscale.selection.core.judging.run_inline``), no event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterator, Sequence

from veriscale.errors import UserError, setting
from veriscale.selection.core.aggregate import TournamentResult, bradley_terry_result
from veriscale.selection.core.bradley_terry import DEFAULT_PRIOR, BradleyTerryFit, fit_bradley_terry
from veriscale.selection.budget.form import Budget, parse_budget  # noqa: F401 (parse_budget: callers import it from here too)
from veriscale.selection.budget.ledger import FULL, SCREEN, CostedJudge, Ledger, Purse
from veriscale.selection.budget.steps import BudgetStep
from veriscale.selection.core.groups import group_candidates
from veriscale.selection.core.judging import run_inline
from veriscale.selection.core.schedules import ring_pairs, shuffled



@dataclass
class BudgetOutcome:
    """The controller's result: the tournament result, its steps and what it spent of ``budget``."""

    result: TournamentResult
    budget: Budget
    steps: list[BudgetStep] = field(default_factory=list)
    spent: int = 0
    smallest: int = 0
    stop_reason: str = "plan complete"
    #: the planned G (``GranularityPlan.to_dict()``), None when the caller planned none
    granularity: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"budget": str(self.budget), "kind": self.budget.kind, "amount": self.budget.amount,
                "spent": self.spent, "left": self.budget.amount - self.spent, "smallest_budget": self.smallest,
                "cache_hits_free": True, "stop_reason": self.stop_reason, "granularity": self.granularity,
                "steps": [s.to_dict() for s in self.steps]}


class BudgetController:
    """Plans and runs one decision inside ``budget`` (see the module docstring)."""

    def __init__(self, budget: Budget | str, *, min_confidence: float = 0.9, seed: int = 0,
                 contention: float = 0.05, close_margin: float = 0.2, n_criteria: int = 1,
                 prior: float = DEFAULT_PRIOR, tie_tolerance: float = 0.02, full_weight: float | None = None) -> None:
        self.budget = parse_budget(budget)
        self.min_confidence, self.seed = min_confidence, seed
        self.contention, self.close_margin = contention, close_margin
        self.n_criteria, self.prior, self.tie_tolerance = max(1, n_criteria), prior, tie_tolerance
        #: a verdict on every criterion weighs as much as that many one-criterion verdicts in the fit
        self.full_weight = float(self.n_criteria) if full_weight is None else full_weight

    def ring(self, n: int) -> list[tuple[int, int]]:
        """The seeded ring over ``n`` local candidates (the first step's comparisons)."""
        import numpy as np  # here, not at import: the CLI's start-up loads no numpy

        return ring_pairs(shuffled(n, np.random.default_rng(self.seed)))

    def smallest_budget(self, n_candidates: int, judge: CostedJudge, groups: Sequence[Hashable] | None = None) -> int:
        """The smallest budget that works: what the first ring comparison costs (0 when it is cached)."""
        reps = group_candidates(n_candidates, groups).representatives
        if len(reps) < 2:
            return 0
        a, b = self.ring(len(reps))[0]
        return judge.cost(reps[a], reps[b], 0, SCREEN).of(self.budget.kind)

    def plan_scale(self, asked: Any, cap: int | None, price: Callable[[Any], int]) -> Any:
        """The G this decision runs on (:func:`veriscale.selection.budget.scale.plan_granularity`):
        ``asked`` lowered only to the backend's read ``cap`` or where a tokens budget requires it;
        ``price(scale)``: the first comparison's cost on ``scale``."""
        from veriscale.selection.budget.scale import plan_granularity

        return plan_granularity(asked, self.budget, cap, price)

    def refuse_if_too_small(self, n_candidates: int, judge: CostedJudge,
                            groups: Sequence[Hashable] | None = None, floor: int | None = None) -> int:
        """Raise a UserError when the budget cannot pay for one comparison; returns the smallest budget
        (``floor``: a lower one that works another way, e.g. on a coarser scale, named instead)."""
        smallest = self.smallest_budget(n_candidates, judge, groups)
        if self.budget.amount < smallest:
            smallest = smallest if floor is None else min(smallest, floor)
            unit = "model calls" if self.budget.kind == "calls" else "prompt tokens"
            raise UserError(
                f"{setting('budget', str(self.budget))} cannot pay for one comparison ({smallest} {unit}): "
                f"the smallest budget that works here is {setting('budget', f'{self.budget.kind}={smallest}')}")
        return smallest

    def run(self, n_candidates: int, judge: CostedJudge, *, groups: Sequence[Hashable] | None = None,
            names: Sequence[str] | None = None, on_step: Callable[[BudgetStep], None] | None = None,
            granularity: Any = None) -> BudgetOutcome:
        """Judge inside the budget and return the result with its steps (``names``: candidate ids for the
        log; ``on_step(step)`` after each step, e.g. to record it on the run; ``granularity``: the
        :meth:`plan_scale` the judge runs on, recorded as the first step)."""
        return run_inline(self._arun(n_candidates, judge, True, groups, names, on_step, granularity))

    async def arun(self, n_candidates: int, judge: CostedJudge, *, groups: Sequence[Hashable] | None = None,
                   names: Sequence[str] | None = None, on_step: Callable[[BudgetStep], None] | None = None,
                   granularity: Any = None) -> BudgetOutcome:
        """:meth:`run` with a judge whose ``__call__`` is async (awaited one judgement at a time)."""
        return await self._arun(n_candidates, judge, False, groups, names, on_step, granularity)

    async def _arun(self, n_candidates: int, judge: CostedJudge, inline: bool, groups: Sequence[Hashable] | None,
                    names: Sequence[str] | None, on_step: Callable[[BudgetStep], None] | None,
                    granularity: Any) -> BudgetOutcome:
        grouped = group_candidates(n_candidates, groups)
        reps = grouped.representatives
        n = len(reps)
        weights = [1.0, float(self.full_weight)][:max(1, judge.n_levels)]
        ledger = Ledger(judge, reps, weights, inline=inline)
        if names is not None:
            ledger.names = [str(names[r]) for r in reps]
        kind, amount = self.budget.kind, self.budget.amount
        if n == 1:
            fit = self._fit(n, ledger)
            result = bradley_terry_result("budget", grouped, ledger, fit, n_comparisons=0, planned=0,
                                          stop="single candidate", tie_tolerance=self.tie_tolerance)
            return BudgetOutcome(result, self.budget, stop_reason="single candidate")
        smallest = self.refuse_if_too_small(n_candidates, judge, groups,
                                            None if granularity is None else granularity.smallest)
        state = Purse(kind, amount)
        steps = [] if granularity is None else [granularity.step(self.budget)]

        ring = self.ring(n)
        level, why = self._screen_level(n, judge, ring, reps)
        done = await self._play(ledger, state, [(a, b, level) for a, b in ring])
        fit = self._fit(n, ledger)
        steps.append(BudgetStep("ring", f"{done} ring comparisons on {judge.level_names[level]}",
                                "a first pass: every candidate meets its neighbour in a seeded ring; " + why,
                                done, state.spent, state.left, fit.confidence))
        if on_step is not None:
            for step in steps:
                on_step(step)
        pivots: list[int] = []
        stop = "nothing left to judge"
        while True:
            if fit.confidence >= self.min_confidence:
                stop = "confident"
                break
            chosen = None
            wanted = False
            for threshold in (self.contention, 0.0):  # nothing left among the contenders: widen to everyone
                for step_kind, actions, added, why in self._steps(fit, ledger, judge, threshold, level):
                    wanted = wanted or bool(actions)
                    affordable = state.affordable(ledger, actions)
                    if affordable:
                        chosen = (step_kind, affordable, added, why)
                        break
                if chosen is not None:
                    break
            if chosen is None:
                stop = "budget spent" if wanted else "nothing left to judge"
                break
            step_kind, actions, added, why = chosen
            done = await self._play(ledger, state, actions)
            if step_kind == "pivot" and actions[0][0] not in pivots:
                pivots.append(actions[0][0])
            fit = self._fit(n, ledger)
            steps.append(BudgetStep(step_kind, added.format(done=done), why, done, state.spent, state.left,
                                    fit.confidence))
            if on_step is not None:
                on_step(steps[-1])
        result = bradley_terry_result("budget", grouped, ledger, fit, n_comparisons=len(ledger.judgements),
                                      planned=len(ledger.judgements), stop=stop, tie_tolerance=self.tie_tolerance,
                                      pivots=tuple(pivots))
        return BudgetOutcome(result, self.budget, steps, state.spent, smallest, stop,
                             None if granularity is None else granularity.to_dict())

    # -- steps -----------------------------------------------------------------------------
    def _steps(self, fit: BradleyTerryFit, ledger: Ledger, judge: CostedJudge, contention: float, level: int
               ) -> Iterator[tuple[str, list[tuple[int, int, int]], str, str]]:
        """The escalation steps in order, each as (kind, actions, what it adds, why)."""
        ranking = list(fit.ranking)
        contenders = [c for c in ranking if fit.prob_best[c] >= contention or c in ranking[:2]]
        screen = judge.level_names[level]

        for pivot in contenders:  # the strongest contender that has not met every other contender
            unmet = [c for c in contenders if c != pivot and not ledger.met(pivot, c)]
            if not unmet:
                continue
            yield ("pivot", [(pivot, c, level) for c in unmet],
                   f"pivot {ledger.names[pivot]} meets {{done}} contender(s) on {screen}",
                   f"{len(contenders)} candidates are in contention (P(best) >= {contention:g}) "
                   f"and {ledger.names[pivot]} (P(best) {fit.prob_best[pivot]:.2f}) has not met {len(unmet)} of them")
            break

        close = []
        for x, a in enumerate(contenders):
            for b in contenders[x + 1:]:
                pref = ledger.mean_preference(a, b)
                if pref is None or ledger.repeats_done(a, b, level) >= judge.max_repeats:
                    continue
                if abs(pref - 0.5) < self.close_margin:
                    close.append((abs(pref - 0.5), a, b))
        if close:
            close.sort()
            picked = close[:max(1, len(contenders) - 1)]
            yield ("repeat", [(a, b, level) for _, a, b in picked],
                   f"{{done}} close contender pair(s) judged again in the other slot order on {screen}",
                   f"their preference is within {self.close_margin:g} of 0.5 (closest: "
                   f"{ledger.names[picked[0][1]]} vs {ledger.names[picked[0][2]]}, {0.5 + picked[0][0]:.2f})")

        if level < judge.n_levels - 1:
            leader = ranking[0]
            pairs = [(leader, other) for other in contenders[1:]]
            pairs += sorted(((a, b) for x, a in enumerate(contenders[1:], 1) for b in contenders[x + 1:]),
                            key=lambda ab: abs((ledger.mean_preference(*ab) or 0.5) - 0.5))
            for a, b in pairs:
                left = judge.max_repeats - ledger.repeats_done(a, b, FULL)
                if left <= 0:
                    continue
                if (a, b) == (leader, contenders[1]):
                    why = "they are the top pair"
                elif a == leader:
                    why = "the top pair is done; this is the leader's next contender"
                else:
                    why = "the leader's pairs are done; this is the closest other pair in contention"
                yield ("criteria", [(a, b, FULL)] * left,
                       f"{ledger.names[a]} vs {ledger.names[b]} judged on {judge.level_names[FULL]} "
                       "({done} slot order(s))", why + f" and the leader's confidence is {fit.confidence:.2f}")
                break

    def _screen_level(self, n: int, judge: CostedJudge, ring: Sequence[tuple[int, int]], reps: Sequence[int]
                      ) -> tuple[int, str]:
        """The criteria level of the ring, pivots and repeats: every criterion when the budget pays for
        PPT with one pivot on them (2N - 1 comparisons), else the first criterion alone."""
        if judge.n_levels < 2:
            return SCREEN, "there is one criterion"
        a, b = ring[0]
        one = judge.cost(reps[a], reps[b], 0, FULL).of(self.budget.kind)
        need = (2 * n - 1) * one
        if self.budget.amount >= need:
            return FULL, (f"the budget pays for PPT with one pivot on {judge.level_names[FULL]} (about {need}), "
                          "so every step judges them")
        return SCREEN, (f"the budget is below PPT with one pivot on {judge.level_names[FULL]} (about {need}), "
                        f"so the ring screens on {judge.level_names[SCREEN]} and more criteria come last")

    async def _play(self, ledger: Ledger, state: "Purse", actions: Sequence[tuple[int, int, int]]) -> int:
        """Judge each action the purse can still pay for, in turn; returns how many were judged."""
        done = 0
        for a, b, level in actions:
            price = ledger.cost(a, b, level).of(state.kind)
            if price > state.left:
                continue
            state.spent += price
            await ledger.ajudge_pair(a, b, level)
            done += 1
        return done

    def _fit(self, n: int, ledger: Ledger) -> BradleyTerryFit:
        return fit_bradley_terry(n, ledger.outcomes(), ledger.weights or None, prior=self.prior, seed=self.seed)
