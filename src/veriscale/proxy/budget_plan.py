"""The proxy's pick inside a per-request budget of verifier calls or prompt tokens (``[proxy] budget``).

    refuse_if_too_small(settings, verifier)        # at serve start-up: one sentence naming the smallest
    plan = plan_pick(settings, verifier, n=3, joint=False)
    plan.schedule, plan.criteria, plan.why         # "early", 2, "the early pick's worst case ..."
    purse = Purse(plan.budget)
    purse.pay(cost, "score", "candidate 1 scored on 2 criteria", "it arrived")   # False: not started

**The plan.** The usual schedule (``ProxySettings.schedule_now``) is kept where the budget affords
it. ``round_robin`` under a budget is the cost controller (:mod:`veriscale.selection.budget.controller`, as
``select --budget``): at N <= 3 its ring is every pair once, then pivots, repeats in the other
slot order and more criteria only while the decision is close and the budget has room; it
screens on the first criterion when the budget is below PPT on all of them. The early pick's
worst case in calls is known before any candidate arrives (N pointwise scores and one
comparison in both slot orders), so it runs on the most criteria (the first c of the set) whose
worst case fits. Where not even one criterion fits, ``auto`` hands the pick to the controller,
and an explicit ``early`` runs on the first criterion with every call paid before it starts.
In tokens the early pick cannot be priced before the candidates exist: it keeps every criterion
and pays each score and the comparison as it starts.

**Paying.** Every score and comparison is priced from the verifier's own plan of its calls, less
what the store already holds (cache hits are free), and starts only if what is left pays for
it; a comparison that does not fit in both slot orders is tried in one. What was paid, skipped
and why is recorded on the request's run (``Purse.to_dict``). A budget too small for the
cheapest comparison the schedule allows is refused when ``serve`` starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from veriscale.errors import UserError, setting
from veriscale.selection.budget.ledger import Cost
from veriscale.selection.budget.form import Budget, parse_budget

#: placeholder texts that price a judgement's fixed part (instructions, fences, criterion) at start-up
_PLACEHOLDER = ("x", "y", "z")


def score_cost(verifier: Any, task: str, text: str) -> Cost:
    """What scoring ``text`` pointwise would spend now (cached calls: free)."""
    estimate = verifier.executor.estimate(verifier.plan_score(task, text)[0])
    return Cost(estimate.calls, estimate.prompt_tokens)


def compare_cost(verifier: Any, task: str, a: str, b: str, only_repeat: int | None = None) -> Cost:
    """What comparing ``a`` with ``b`` would spend now: both slot orders, or repeat ``only_repeat``."""
    estimate = verifier.executor.estimate(verifier.plan_compare(task, a, b, only_repeat=only_repeat)[0])
    return Cost(estimate.calls, estimate.prompt_tokens)


def _early_worst_calls(verifier: Any, n: int, n_criteria: int) -> int:
    """The early pick's most calls at N candidates on the first ``n_criteria`` criteria."""
    v = verifier.with_first_criteria(n_criteria)
    task, a, b = _PLACEHOLDER
    return n * len(v.plan_score(task, a)[0]) + len(v.plan_compare(task, a, b)[0])


@dataclass(frozen=True)
class PickPlan:
    """How one request's pick spends ``budget``: ``schedule`` (early, or round_robin = the cost
    controller), ``criteria`` (the early pick's first criteria), ``why`` in one sentence."""

    budget: Budget
    schedule: str
    criteria: int
    why: str
    worst_calls: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"budget": str(self.budget), "schedule": self.schedule, "criteria": self.criteria,
                "why": self.why, "worst_calls": self.worst_calls}


def plan_pick(settings: Any, verifier: Any, n: int, joint: bool) -> PickPlan:
    """The schedule and criteria ``settings.budget`` affords for ``n`` candidates (see the module docstring)."""
    budget = parse_budget(settings.budget)
    usual = settings.schedule_now(joint, n)
    n_criteria = len(verifier.criteria.items)
    controller = ("the cost controller plays the ring (every pair once at N <= 3), then pivots, repeats and "
                  "criteria while the decision is close, each judgement paid before it starts")
    if usual != "early":
        return PickPlan(budget, "round_robin", n_criteria, f"{usual} schedule: " + controller)
    if budget.kind == "tokens":
        return PickPlan(budget, "early", n_criteria, "the early pick on every criterion: prompt tokens are known only "
                        "as candidates arrive, so each score and the comparison is paid as it starts")
    for c in range(n_criteria, 0, -1):
        worst = _early_worst_calls(verifier, n, c)
        if worst <= budget.amount:
            on = "every criterion" if c == n_criteria else f"the first {c} of {n_criteria} criteria"
            return PickPlan(budget, "early", c, f"the early pick on {on}: its worst case ({worst} calls: {n} scores "
                            f"and one comparison in both slot orders) fits {budget}", worst)
    worst = _early_worst_calls(verifier, n, 1)
    if settings.schedule == "auto":
        return PickPlan(budget, "round_robin", n_criteria, f"the early pick's worst case on one criterion ({worst} "
                        f"calls) is over {budget}, so " + controller)
    return PickPlan(budget, "early", 1, f"the early pick on the first criterion: its worst case ({worst} calls) is "
                    f"over {budget}, so a score or comparison that does not fit is not started", worst)


def smallest_budget(settings: Any, verifier: Any, kind: str) -> int:
    """The cheapest comparison the schedule allows, in ``kind``: one slot order of a pair on the first
    criterion (the controller's first judgement) or two pointwise scores on it (the early pick's). In
    tokens it is the prompts' fixed part, before any request's text: a floor."""
    v = verifier.with_first_criteria(1)
    task, a, b = _PLACEHOLDER
    options = []
    if settings.schedule in ("auto", "round_robin"):
        options.append(compare_cost(v, task, a, b, only_repeat=0))
    if settings.schedule in ("auto", "early"):
        one = score_cost(v, task, a)
        options.append(Cost(2 * one.calls, 2 * one.tokens))
    return min(c.of(kind) for c in options)


def refuse_if_too_small(settings: Any, verifier: Any) -> None:
    """Raise a UserError when ``settings.budget`` cannot pay for one comparison, naming the smallest that works."""
    if settings.budget is None:
        return
    budget = parse_budget(settings.budget)
    smallest = smallest_budget(settings, verifier, budget.kind)
    if budget.amount >= smallest:
        return
    unit = "verifier calls" if budget.kind == "calls" else "prompt tokens before any request's text"
    raise UserError(f"{setting('proxy_budget', str(budget))} cannot pay for one comparison of the proxy's pick "
                    f"({smallest} {unit}): the smallest budget that works here is "
                    f"{setting('proxy_budget', f'{budget.kind}={smallest}')}")


@dataclass
class Purse:
    """What one request's pick has spent of ``budget``, and each step paid or skipped."""

    budget: Budget
    spent: int = 0
    steps: list[dict[str, Any]] = field(default_factory=list)
    #: called with each step as it is recorded (e.g. ``RunLog.emit(run_id, "budget", step)``)
    on_step: Callable[[dict[str, Any]], None] | None = None

    @property
    def left(self) -> int:
        return self.budget.amount - self.spent

    def fits(self, cost: Cost) -> bool:
        return cost.of(self.budget.kind) <= self.left

    def pay(self, cost: Cost, step: str, added: str, why: str) -> bool:
        """Spend ``cost`` and record the step when it fits; else record it as skipped. True: paid."""
        price = cost.of(self.budget.kind)
        paid = price <= self.left
        if paid:
            self.spent += price
        else:
            step, added, why = "skipped", added, f"{why}; it needs {price} and {self.left} is left"
        self.steps.append({"step": step, "added": added, "why": why, "judgements": int(paid),
                           "spent": self.spent, "left": self.left, "confidence": None})
        if self.on_step is not None:
            self.on_step(self.steps[-1])
        return paid

    def to_dict(self, plan: PickPlan, stop_reason: str) -> dict[str, Any]:
        """The account the run records (the shape of ``BudgetOutcome.to_dict``, plus the plan)."""
        return {"budget": str(self.budget), "kind": self.budget.kind, "amount": self.budget.amount,
                "spent": self.spent, "left": self.left, "cache_hits_free": True, "stop_reason": stop_reason,
                "plan": plan.to_dict(), "steps": list(self.steps)}
