"""Best-of-N with the verifier: plan (render, schedule, price), run the tournament, explain the pick.

    from veriscale.models.uri import load_backend
    from veriscale.selection.select import select
    from veriscale.verify.reward import Verifier

    verifier = Verifier(load_backend("embedded"), criteria="agent")
    sel = select(None, candidates, verifier=verifier)      # task taken from the runs themselves
    sel.best.id, sel.confidence, sel.reason.text, sel.usage.model_calls

    plan = plan_selection(None, candidates, verifier=verifier, settings=settings)   # --dry-run
    sel = run_selection(plan, verifier=verifier)                                     # the same plan, run
    sel = await aselect(None, candidates, verifier=verifier)   # on the caller's event loop
    sel = select(None, candidates, verifier=verifier, budget="calls=40")              # the cost controller
    sel.budget["spent"], sel.budget["steps"]

``select`` is ``run_selection(plan_selection(...))``, and ``run_selection`` is
:func:`arun_selection` run to its end by :mod:`veriscale.engine.sync_edge` (``asyncio.run`` on the
calling thread): the tournaments are async, and every model call of a selection is awaited on
one loop, the caller's. ``aselect`` plans in a worker thread (rendering and counting tokens may
ask a server's tokenizer over a blocking client) and then awaits the same ``arun_selection``. Planning (``veriscale.selection.plan``)
renders every candidate once; the tournaments (``veriscale.selection.core.tournament``) choose the
pairs and ``VerifierJudge`` (``veriscale.selection.judge``) judges them; Bradley–Terry over
every judgement gives the win mass, ranking and confidence. Each judgement carries its
per-criterion rewards: a candidate's criteria scores are their means over the comparisons it
took part in, and the reason compares the winner's with the runner-up's. The :class:`Selection`
returned (the record and its JSON) is :mod:`veriscale.selection.result`'s, importable from here too.

With ``budget`` (``SelectionSettings.budget``: ``"calls=N"`` or ``"tokens=N"``), the cost controller
(``veriscale.selection.budget.controller``) plays PPT's steps inside it instead of the fixed schedule; cache
hits do not count against it, and ``max_calls`` stays the verifier's hard refusal.

A server that does not report its context may refuse the first prompts as too long, naming its
context (``veriscale.models.context.ContextOverflow``): ``run_selection`` then plans once more
for that context (a given ``budget_tokens`` that cannot fit it is refused in one sentence) and
runs the new plan.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import replace
from typing import Any, Callable, Sequence, TypedDict, cast

from veriscale.data.model import Candidate, Task
from veriscale.engine import sync_edge
from veriscale.engine.sync_facade import Usage
from veriscale.engine.usage import GatewayUsage, usage_tap
from veriscale.errors import UserError, setting, worded
from veriscale.models.context import ContextOverflow, learned_context, refit_note
from veriscale.selection.budget.controller import BudgetController
from veriscale.selection.budget.form import Budget
from veriscale.selection.budget.steps import BudgetStep
from veriscale.selection.budget.verifier_judge import VerifierBudgetJudge
from veriscale.selection.judge import SelectionFailed, VerifierJudge
from veriscale.selection.plan import SelectionPlan, plan_selection, round_robin_refusal
from veriscale.selection.reason import Reason, explain
from veriscale.selection.rendering import tokenizer_requests
from veriscale.selection.result import Selection
from veriscale.selection.settings import METHODS, SelectionSettings
from veriscale.selection.verifier_seam import BudgetVerifier, SelectionVerifier
from veriscale.verify import injection as injection_signal
from veriscale.selection.core.judging import InOrder
from veriscale.selection.core.options import TournamentKnobs
from veriscale.selection.core.suspects import apply_policy
from veriscale.selection.core.tournament import TournamentResult, aknockout, apointwise, appt, around_robin

__all__ = ["METHODS", "Progress", "Selection", "SelectionFailed", "SelectionPlan", "SelectionSettings",
           "arun_selection", "aselect", "plan_selection", "run_selection", "select"]

Progress = Callable[[int, int], None]
"""``on_progress(calls_done, calls_planned)`` after every finished or cached model call; adaptive
extra repeats can take ``calls_done`` past ``calls_planned``."""


def select(
    task: Task | str | None,
    candidates: Sequence[Candidate],
    *,
    verifier: SelectionVerifier,
    settings: SelectionSettings | None = None,
    on_progress: Progress | None = None,
    **overrides: Any,
) -> Selection:
    """Pick the best of ``candidates`` for ``task`` (None: the task the candidates carry).

    ``settings`` (or ``SelectionSettings`` fields as keywords: ``method="round_robin"``,
    ``k=1``, ``adaptive=False``, ``min_confidence=0.8``, ``repeats``, ``budget_tokens``,
    ``seed``). ``verifier``: a ``Verifier``, or anything with the members of
    :class:`veriscale.selection.verifier_seam.SelectionVerifier` (``acompare``/``ascore``, ``model``,
    ``criteria``, ``scale``, ``reasoning``, ``repeats``, ``injection_detect``, ``usage``).
    """
    plan = plan_selection(task, candidates, verifier=verifier, settings=settings, **overrides)
    return run_selection(plan, verifier=verifier, on_progress=on_progress)


async def aselect(
    task: Task | str | None,
    candidates: Sequence[Candidate],
    *,
    verifier: SelectionVerifier,
    settings: SelectionSettings | None = None,
    on_progress: Progress | None = None,
    **overrides: Any,
) -> Selection:
    """:func:`select` on the running event loop: planned in a worker thread, then every model call
    awaited on this loop (two ``aselect`` on one loop share the model's slots and overlap)."""
    plan = await asyncio.to_thread(plan_selection, task, candidates, verifier=verifier, settings=settings,
                                   **overrides)
    return await arun_selection(plan, verifier=verifier, on_progress=on_progress)


def adaptive_calls_text(calls_saved: int) -> str:
    """What adaptive stopping did to the call count, in words: "6 model calls saved", or, when it
    judged close pairs again past the plan, "6 more model calls than planned" (never "-6 saved")."""
    if calls_saved >= 0:
        return f"{calls_saved} model calls saved"
    return f"{-calls_saved} more model calls than planned"


def run_selection(plan: SelectionPlan, *, verifier: SelectionVerifier, on_progress: Progress | None = None,
                  on_step: Callable[[dict[str, Any]], None] | None = None) -> Selection:
    """Run ``plan`` (from ``plan_selection`` with a verifier for the same model) and explain the pick;
    replanned once for the context a too-long prompt's reply names. ``on_step(step)``: each cost
    controller step as a dict, as it is taken (a plan with a budget; e.g. to record it on the run)."""
    return sync_edge.run(arun_selection(plan, verifier=verifier, on_progress=on_progress, on_step=on_step))


async def arun_selection(plan: SelectionPlan, *, verifier: SelectionVerifier, on_progress: Progress | None = None,
                         on_step: Callable[[dict[str, Any]], None] | None = None) -> Selection:
    """:func:`run_selection` awaited on the running loop (the tournaments' judges await the verifier)."""
    try:
        return await _run_plan(plan, verifier, on_progress, on_step)
    except ContextOverflow as overflow:
        context = learned_context(overflow, verifier.model)
        if context is None:
            raise
        refit = await asyncio.to_thread(plan_selection, plan.pool.task, plan.pool.candidates, verifier=verifier,
                                        settings=plan.settings)
    note = refit_note(context, f"the render budget ({refit.budget_tokens} tokens per candidate)")
    return await _run_plan(replace(refit, notes=(*refit.notes, note)), verifier, on_progress, on_step)


async def _run_plan(plan: SelectionPlan, verifier: SelectionVerifier, on_progress: Progress | None,
              on_step: Callable[[dict[str, Any]], None] | None = None) -> Selection:
    settings, pool = plan.settings, plan.pool
    candidates = list(pool.candidates)
    names = [c.name for c in verifier.criteria.items]
    notes = list(plan.notes)

    detect = verifier.injection_detect
    flags = _injection_spans(pool.texts, detect)
    inj = _InjectionFields(injection=flags, injection_detect=detect, injection_policy=settings.injection_policy)

    if plan.n_distinct == 1:
        what = "one candidate" if len(candidates) == 1 else f"all {len(candidates)} candidates have the same output"
        notes.append(f"{what}: returned it without judging")
        return Selection(
            task=pool.task, candidates=candidates, method=plan.method, index=0,
            scores=tuple(1.0 / len(candidates) for _ in candidates), ranking=tuple(range(len(candidates))),
            confidence=1.0, reason=explain(candidates[0].id, None, {}, {}, confidence=1.0),
            ties=tuple((a, b) for a in range(len(candidates)) for b in range(a + 1, len(candidates))),
            n_comparisons=0, n_judgements=0, usage=Usage(tokenizer_requests=plan.tokenizer_requests),
            criteria_scores=[{n: None for n in names} for _ in candidates], min_confidence=settings.min_confidence,
            plan=plan, adaptive=settings.adaptive, stop_reason="single candidate", notes=notes, **inj,
        )

    too_many = round_robin_refusal(plan.method, plan.n_distinct)
    if too_many:
        raise UserError(getattr(too_many, "template", too_many))
    counter = _call_counter(on_progress, plan.model_calls_planned if plan.budget is not None
                            else plan.judgements_planned * plan.calls_per_judgement)
    before = verifier.usage.copy()
    requests_before = tokenizer_requests(verifier.model)
    with usage_tap() as spent:  # this selection's calls, not those of others running on the same gateway
        result, budget, judge = await _judge_plan(plan, verifier, pool, counter, names, notes, on_step)
    usage = replace(spent) if isinstance(verifier.usage, GatewayUsage) else verifier.usage.since(before)
    # the tokenizer requests of fitting the plan's prompts and of the run (label checks)
    usage.tokenizer_requests += plan.tokenizer_requests + tokenizer_requests(verifier.model) - requests_before
    criteria_scores = criteria_means(result, names, pool.groups)
    calls_saved = result.judgements_saved * plan.calls_per_judgement if result.adaptive else 0
    if judge.low_label_mass:
        notes.append(worded(
            f"{judge.low_label_mass} of {judge.verdicts} verdicts had low label mass (the model mostly "
            f"answered off the score format): treat this pick with caution, or use a stronger {setting('model')}"
        ))
    if result.adaptive and budget is None:
        notes.append(
            f"adaptive: stopped with '{result.stop_reason}' after {result.n_judgements} of "
            f"{result.judgements_planned} planned judgements ({adaptive_calls_text(calls_saved)})"
        )
    suspected = {i for i, h in enumerate(flags) if h is not None}
    ranking, changed = apply_policy(result.ranking, ties=result.ties, suspected=suspected,
                                    policy=settings.injection_policy, ids=[c.id for c in candidates])
    confidence = result.confidence
    if changed:
        notes.append(changed)
        if ranking[0] != result.winner:  # the tournament's confidence was about its own winner
            confidence = None
    return Selection(
        task=pool.task, candidates=candidates, method=plan.method, index=ranking[0], scores=result.win_mass,
        ranking=ranking, confidence=confidence,
        reason=_reason(replace(result, winner=ranking[0], ranking=ranking, confidence=confidence), candidates,
                       criteria_scores, pool.groups), ties=result.ties,
        n_comparisons=result.n_comparisons, n_judgements=result.n_judgements, usage=usage,
        criteria_scores=criteria_scores, min_confidence=settings.min_confidence, plan=plan,
        adaptive=result.adaptive, judgements_saved=result.judgements_saved if result.adaptive else 0,
        calls_saved=calls_saved, stop_reason=result.stop_reason, notes=notes, tournament=result, budget=budget, **inj,
    )


class _InjectionFields(TypedDict):
    """The detector's fields of a :class:`Selection`."""

    injection: list[dict[str, Any] | None]
    injection_detect: bool
    injection_policy: str


async def _judge_plan(plan: SelectionPlan, verifier: SelectionVerifier, pool: Any, counter: Any, names: list[str],
                      notes: list[str], on_step: Callable[[dict[str, Any]], None] | None) -> tuple[Any, Any, Any]:
    """The plan's tournament (or its budget controller's steps): the result, the budget's record, the judge."""
    settings = plan.settings
    budget = None
    if plan.budget is not None:
        granularity = plan.granularity  # the G the plan chose: the verifier reads on that scale
        priced = cast(BudgetVerifier, verifier)  # a plan with a budget was priced by this verifier's plan and store
        judge: Any = VerifierBudgetJudge(priced if granularity is None else priced.with_scale(granularity.scale),
                                         pool, counter)
        assert isinstance(settings.budget, Budget)  # SelectionSettings parses it
        step_seen = None if on_step is None else _step_dicts(on_step)
        controller = BudgetController(settings.budget, min_confidence=settings.min_confidence, seed=settings.seed,
                                      n_criteria=len(names))
        controlled = await controller.arun(plan.n_candidates, judge, groups=list(pool.groups),
                                           names=[c.id for c in pool.candidates], on_step=step_seen,
                                           granularity=granularity)
        result, budget = controlled.result, controlled.to_dict()
        notes.append(f"budget {settings.budget}: spent {controlled.spent} in {len(controlled.steps)} step(s), "
                     f"stopped with '{controlled.stop_reason}'")
    else:
        judge = VerifierJudge(verifier, pool, counter)
        result = await _run_tournament(plan, judge)

    return result, budget, judge


def _injection_spans(texts: Sequence[str], detect: bool) -> list[dict[str, Any] | None]:
    """Per rendered candidate (what the judge reads), the detector's span or None."""
    if not detect:
        return [None] * len(texts)
    return [(hit.to_dict() if (hit := injection_signal.detect(t)) else None) for t in texts]


def criteria_means(result: TournamentResult, names: list[str], groups: Sequence[str]) -> list[dict[str, float | None]]:
    """Per candidate, its mean reward per criterion over its judgements; group members share their representative's."""
    rewards: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for c in result.comparisons:
        for name, (reward_i, reward_j) in (c.rewards or {}).items():
            if reward_i is not None:
                rewards[c.i][name].append(reward_i)
            if reward_j is not None:
                rewards[c.j][name].append(reward_j)
    for s in result.scores:
        for name, reward in (s.rewards or {}).items():
            if reward is not None:
                rewards[s.i][name].append(reward)
    first_of: dict[str, int] = {}
    for index, g in enumerate(groups):
        first_of.setdefault(g, index)
    out = []
    for g in groups:
        row = rewards.get(first_of[g], {})
        out.append({n: (sum(row[n]) / len(row[n]) if row.get(n) else None) for n in names})
    return out


def head_to_head(result: TournamentResult, a: int, b: int) -> float | None:
    """Mean P(a beats b) over their direct judgements, or None if they never met."""
    values = [c.p for c in result.comparisons if (c.i, c.j) == (a, b)]
    values += [1.0 - c.p for c in result.comparisons if (c.i, c.j) == (b, a)]
    return sum(values) / len(values) if values else None


def paced(judge: Callable[..., Any], verifier: SelectionVerifier) -> Callable[..., Any]:
    """``judge`` as the tournaments should await it: in schedule order for a model that runs one call
    at a time (the embedded model reuses the prompt prefix consecutive calls share), else a round at once."""
    return InOrder(judge) if verifier.model.is_embedded else judge


async def _run_tournament(plan: SelectionPlan, judge: VerifierJudge) -> TournamentResult:
    n, groups, seed = plan.n_candidates, list(plan.pool.groups), plan.settings.seed
    compare = paced(judge.acompare, judge.verifier)
    if plan.method == "pointwise":
        return await apointwise(n, paced(judge.ascore, judge.verifier), groups=groups)
    if plan.method == "knockout":
        return await aknockout(n, compare, repeats=plan.repeats, groups=groups, seed=seed)
    knobs: TournamentKnobs = {"adaptive": plan.adaptive, "min_confidence": plan.settings.min_confidence,
                              "max_repeats": plan.max_repeats, "groups": groups, "seed": seed}
    if plan.method == "round_robin":
        return await around_robin(n, compare, repeats=plan.repeats, **knobs)
    return await appt(n, compare, k=plan.k or 1, repeats=plan.repeats, **knobs)


def _reason(result: TournamentResult, candidates: list[Candidate], scores: list[dict[str, float | None]],
            groups: Sequence[str]) -> Reason:
    winner = result.winner
    runner = next((i for i in result.ranking if groups[i] != groups[winner]), None)
    if runner is None:
        return explain(candidates[winner].id, None, {}, {}, confidence=result.confidence)
    return explain(
        candidates[winner].id, candidates[runner].id, scores[winner], scores[runner],
        head_to_head=head_to_head(result, winner, runner), confidence=result.confidence,
        pointwise=_pointwise_rewards(result, groups, winner, runner),
    )


def _pointwise_rewards(result: TournamentResult, groups: Sequence[str], winner: int,
                       runner: int) -> tuple[float, float] | None:
    """The rewards a pointwise pick rests on (each candidate's group was scored once), else None."""
    if result.method != "pointwise" or result.comparisons:
        return None
    by_group = {groups[s.i]: s.reward for s in result.scores}
    first, second = by_group.get(groups[winner]), by_group.get(groups[runner])
    return None if first is None or second is None else (first, second)


def _step_dicts(on_step: Callable[[dict[str, Any]], None]) -> Callable[[BudgetStep], None]:
    """``on_step`` fed each controller step as a dict."""
    return lambda step: on_step(step.to_dict())


def _call_counter(on_progress: Progress | None, planned: int) -> Callable[[Any], None] | None:
    """A per-call progress callback that reports ``(calls done, calls planned)`` to ``on_progress``."""
    if on_progress is None:
        return None
    done = 0

    def advance(_outcome: Any) -> None:
        nonlocal done
        done += 1
        on_progress(done, planned)

    return advance
