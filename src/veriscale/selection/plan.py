"""Plan a selection once: render every candidate, fix the schedule, price it, before any model call.

    plan = plan_selection(None, candidates, verifier=verifier, settings=SelectionSettings(k=1))
    plan.model_calls_planned, plan.prompt_tokens_upper_bound, plan.to_dict()   # what --dry-run shows
    sel = run_selection(plan, verifier=verifier)                               # runs exactly this plan

**Rendering.** The task is rendered once (at most a quarter of the model's context) and every
candidate once under the plan's budget (``veriscale.selection.prompt_fit``), counted by the
model's own tokenizer through one ``Renderer`` (a server's: each text tokenised once and cut at
token offsets; the requests it took are ``plan.tokenizer_requests``). Candidates whose rendered
text is identical form one group and are judged once.

**Repeats.** What repeat r computes is ``veriscale.verify.repeats``: without
``verifier.reasoning`` a pair has only two distinct judgements (its two slot orders), and a
third would be a cache hit counted as fresh evidence. So then PPT judges each comparison once
(a pair it meets in the ring and again in a pivot round gets both slot orders), round robin and
knockout at most twice, and adaptive mode re-judges a pair at most twice.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields, replace
from typing import Any, Sequence, TypedDict, cast

from veriscale.data.images import load_images
from veriscale.selection.image_cost import ImageCost
from veriscale.data.model import Candidate, Task
from veriscale.data.pool import require_single_task
from veriscale.data.reader import require_utf8
from veriscale.errors import UserError, setting, worded
from veriscale.selection.prompt_fit import fit_prompt
from veriscale.selection.core.adaptive import ADAPTIVE_MAX_REPEATS_SAMPLED
from veriscale.selection.rendering import RenderedPool, Renderer, tokenizer_requests
from veriscale.selection.core.schedules import ppt_comparison_count
from veriscale.selection.settings import SelectionSettings
from veriscale.selection.budget.form import Budget
from veriscale.selection.verifier_seam import BudgetVerifier, SelectionVerifier
from veriscale.verify.repeats import distinct_repeat_count, distinct_repeats

MAX_ROUND_ROBIN_COMPARISONS = 500_000  # ~1,000 distinct candidates; its schedule is built in memory


class PlanFigures(TypedDict):
    """What a schedule costs (the :class:`SelectionPlan` fields of the same names)."""

    comparisons_planned: int
    judgements_planned: int
    calls_per_judgement: int
    model_calls_planned: int
    model_calls_upper_bound: int
    prompt_tokens_upper_bound: int


@dataclass(frozen=True)
class SelectionPlan:
    """One selection, planned: the rendered pool, the schedule and what it will cost.

    ``settings``: as asked; ``k``, ``repeats``, ``adaptive``: as they will run (lowered when
    there are fewer distinct candidates, or repeats that would recompute the same thing).
    ``judgements_planned × calls_per_judgement`` calls are asked (cache hits included);
    ``model_calls_planned``: the new ones the schedule can need without adaptive stopping
    (a pair judged again in a slot order it already had is a cache hit). ``model_calls_upper_bound``:
    the most it can take (adaptive extra repeats included); cached calls cost nothing and are
    not subtracted. ``prompt_tokens_upper_bound`` counts whole prompts; prefix reuse in the
    embedded model and in servers processes fewer. ``to_dict()`` holds the figures, not the pool.
    """

    settings: SelectionSettings
    pool: RenderedPool
    method: str
    n_candidates: int
    n_distinct: int
    k: int | None
    repeats: int
    adaptive: bool
    budget_tokens: int
    task_tokens: int
    comparisons_planned: int
    judgements_planned: int
    calls_per_judgement: int
    model_calls_planned: int
    model_calls_upper_bound: int
    prompt_tokens_upper_bound: int
    notes: tuple[str, ...] = ()
    max_repeats: int = ADAPTIVE_MAX_REPEATS_SAMPLED
    #: the cost controller's budget ("calls=60"), None for the fixed schedule; then the call
    #: figures above are capped by it in calls mode, and ``smallest_budget`` is the least that works
    budget: str | None = None
    smallest_budget: int | None = None
    #: the cost controller's G (``veriscale.selection.budget.scale.GranularityPlan``), None without a budget
    granularity: Any = None
    #: requests the plan sent to the model's tokenizer (fitting and rendering; 0 for an in-process model)
    tokenizer_requests: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The plan's figures (what ``--dry-run --json`` prints)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("settings", "pool", "max_repeats")}
        data["notes"] = list(self.notes)
        data["granularity"] = None if self.granularity is None else self.granularity.to_dict()
        return data


def plan_selection(
    task: Task | str | None,
    candidates: Sequence[Candidate],
    *,
    verifier: SelectionVerifier,
    settings: SelectionSettings | None = None,
    renderer: Renderer | None = None,
    **overrides: Any,
) -> SelectionPlan:
    """Plan choosing the best of ``candidates`` for ``task`` (None: the task the candidates carry).

    ``overrides`` are ``SelectionSettings`` fields (``method="round_robin"``, ``k=1``, ...)
    applied over ``settings``. ``renderer``: share one across plans for the same model.
    """
    settings = replace(settings or SelectionSettings(), **overrides)
    requests_before = tokenizer_requests(verifier.model)
    renderer = renderer or Renderer.for_model(verifier.model)
    method = settings.method
    task, candidates = _task_and_candidates(task, candidates)
    fit = fit_prompt(verifier, task, settings.budget_tokens, pairwise=method != "pointwise", renderer=renderer)
    notes: list[str] = list(fit.notes)

    require_utf8(fit.task_text, "task")
    task_images = load_images(task.images)
    images = tuple(load_images(c.images) for c in candidates)
    shown = ImageCost.of(verifier, task_images, images, fit, pairwise=method != "pointwise")
    if shown is not None:
        fit = replace(fit, budget_tokens=shown.budget_tokens, overhead_tokens=fit.overhead_tokens + shown.task_tokens)
        notes.append(shown.note)
    texts = tuple(require_utf8(renderer.candidate(c, fit.budget_tokens), f"candidate {c.id}") for c in candidates)
    # identical = the same text and the same images (two runs that differ only in what they saw are distinct)
    groups = tuple(hashlib.sha256("\0".join([t, *(img.sha256 for img in imgs)]).encode("utf-8")).hexdigest()
                   for t, imgs in zip(texts, images))
    n_distinct = len(set(groups))
    if 1 < n_distinct < len(candidates):
        notes.append(f"{len(candidates) - n_distinct} candidate(s) repeat another's output and are judged once with it")

    sampled = verifier.reasoning
    wanted = settings.repeats_wanted
    repeats = _repeats_per_comparison(method, wanted, sampled)
    if repeats < wanted:
        notes.append(worded(
            f"repeats lowered from {wanted} to {repeats}: without {setting('reasoning')} further judgements of a pair "
            "repeat a slot order already judged"
        ))
    max_repeats = len(distinct_repeats(max(ADAPTIVE_MAX_REPEATS_SAMPLED, repeats), pairwise=True, reasoning=sampled))
    k = None
    if method == "ppt":
        k = min(settings.k, n_distinct)
        if settings.k > n_distinct > 1:
            notes.append(f"k lowered from {settings.k} to {k}: there are only {n_distinct} distinct candidates")

    too_many = round_robin_refusal(method, n_distinct)
    if too_many:
        notes.append(too_many)
    if settings.budget is None:  # with a budget the controller lowers G itself (budget_scale)
        notes.extend(_read_cap_note(verifier))
    pool = RenderedPool(task, tuple(candidates), fit.task_text, texts, groups, task_images,
                        images if any(images) else ())
    seen = {g: renderer.count(t) + (shown.candidate_tokens[i] if shown else 0)
            for i, (g, t) in enumerate(zip(groups, texts))}
    text_tokens = sorted(seen.values(), reverse=True)
    figures = _cost(method, n_distinct, k, repeats, settings.adaptive_applies, max_repeats, verifier, text_tokens,
                    fit.overhead_tokens)
    plan = SelectionPlan(
        settings=settings, pool=pool, method=method, n_candidates=len(candidates), n_distinct=n_distinct, k=k,
        repeats=repeats, adaptive=settings.adaptive_applies, budget_tokens=fit.budget_tokens,
        task_tokens=fit.task_tokens, notes=tuple(notes), max_repeats=max_repeats, **figures,
    )
    plan = _within_budget(plan, verifier) if settings.budget is not None else plan
    return replace(plan, tokenizer_requests=tokenizer_requests(verifier.model) - requests_before)


def _within_budget(plan: SelectionPlan, verifier: SelectionVerifier) -> SelectionPlan:
    """The plan under the cost controller: its G planned (``budget_scale``), refused when the budget
    cannot pay for one comparison (before any call), its call figures capped in calls mode."""
    from veriscale.selection.budget.controller import BudgetController
    from veriscale.selection.budget.verifier_judge import VerifierBudgetJudge
    from veriscale.selection.budget.scale import readable_labels

    budget = plan.settings.budget
    assert isinstance(budget, Budget)  # SelectionSettings parses it
    priced = cast(BudgetVerifier, verifier)  # a verifier planned under a budget prices with its plan and store
    controller = BudgetController(budget, seed=plan.settings.seed)
    groups = list(plan.pool.groups)

    def price(scale: Any) -> int:
        return controller.smallest_budget(plan.n_candidates, VerifierBudgetJudge(priced.with_scale(scale), plan.pool),
                                          groups)

    granularity = controller.plan_scale(verifier.scale, readable_labels(verifier), price)
    smallest = controller.refuse_if_too_small(plan.n_candidates,
                                              VerifierBudgetJudge(priced.with_scale(granularity.scale), plan.pool),
                                              groups, granularity.smallest)
    if budget.kind == "calls":
        plan = replace(plan, model_calls_planned=min(plan.model_calls_planned, budget.amount),
                       model_calls_upper_bound=min(plan.model_calls_upper_bound, budget.amount))
    else:
        plan = replace(plan, prompt_tokens_upper_bound=min(plan.prompt_tokens_upper_bound, budget.amount))
    note = (f"budget {budget} per decision: the cost controller plans pivots, repeats and criteria inside it "
            "(cache hits do not count against it)")
    notes = (*plan.notes, note) + ((f"G lowered from {granularity.asked.granularity} to "
                                    f"{granularity.scale.granularity}: {granularity.why}",) if granularity.lowered else ())
    return replace(plan, budget=str(budget), smallest_budget=smallest, adaptive=True, granularity=granularity,
                   notes=notes)


def _read_cap_note(verifier: SelectionVerifier) -> list[str]:
    """A note when the verifier shows fewer tokens of a slot than the scale has labels."""
    from veriscale.selection.budget.scale import coarser, readable_labels

    scale, cap = verifier.scale, readable_labels(verifier)
    if cap is None or scale.granularity <= cap:
        return []
    fits = coarser(scale, cap)
    instead = f"use {setting('scale', fits.name)}" if fits is not None else "raise the URI's top_logprobs"
    return [worded(f"scale {scale.name} has {scale.granularity} labels but the verifier shows the top {cap} tokens "
                   f"of a slot (top_logprobs), so labels outside them read as probability 0: {instead}, "
                   f"or give {setting('budget')}, whose plan lowers G to what one call reads")]


def round_robin_refusal(method: str, n_distinct: int) -> str | None:
    """Why a round robin this large will not run (None when it will): the plan shows it, a run raises it."""
    comparisons = n_distinct * (n_distinct - 1) // 2
    if method != "round_robin" or comparisons <= MAX_ROUND_ROBIN_COMPARISONS:
        return None
    return worded(f"round robin judges every pair: {n_distinct:,} distinct candidates make {comparisons:,} comparisons, "
                  f"more than the {MAX_ROUND_ROBIN_COMPARISONS:,} it runs; use {setting('method', 'ppt')} "
                  "(N + k(N-k) comparisons) or fewer candidates")


def _task_and_candidates(task: Task | str | None, candidates: Sequence[Candidate]) -> tuple[Task, list[Candidate]]:
    """The one task the candidates answer (``task`` overrides); refuses mixed tasks and a missing one."""
    if isinstance(task, str):
        task = Task(text=task)
    candidates = list(candidates)
    task = require_single_task(candidates, task).task
    if task is None or not task.text.strip():
        if len(candidates) > 1:
            raise UserError(
                f"the candidates do not say what their task was: pass it as {setting('task')}"
            )
        task = task or Task(text="")
    return task, candidates


def _repeats_per_comparison(method: str, wanted: int, sampled: bool) -> int:
    """Judgements per comparison that can each bring something new (see the module docstring)."""
    if method == "pointwise" or sampled:
        return wanted
    if method == "ppt":
        return 1
    return len(distinct_repeats(wanted, pairwise=True, reasoning=False))


def _cost(method: str, n: int, k: int | None, repeats: int, adaptive: bool, max_repeats: int, verifier: SelectionVerifier,
          text_tokens: list[int], overhead: int) -> PlanFigures:
    """Comparisons, judgements and model calls the schedule takes, and the prompt tokens at most."""
    n_criteria = len(verifier.criteria.items)
    sampled = verifier.reasoning
    all_pairs = n * (n - 1) // 2
    if n <= 1:
        comparisons, judgements, bound, per_call_texts = 0, 0, 0, 0
    elif method == "pointwise":
        comparisons = 0
        judgements = bound = n
        per_call_texts = text_tokens[0]
    else:
        if method == "ppt":
            comparisons = ppt_comparison_count(n, k or 1)
        elif method == "round_robin":
            comparisons = all_pairs
        else:
            comparisons = n - 1
        judgements = comparisons * repeats
        bound = judgements
        if adaptive:
            bound = max(judgements, min(all_pairs, comparisons) * max_repeats)
        per_call_texts = sum(text_tokens[:2])
    if method == "pointwise":
        scored = distinct_repeats(verifier.repeats or 1, pairwise=False, reasoning=sampled)
        per_judgement = n_criteria * len(scored)
    else:
        per_judgement = 2 * n_criteria
    planned = judgements
    if method != "pointwise" and n > 1:
        # judging a pair again as a computation it already had is a cache hit, not a new call
        per_pair = distinct_repeat_count(bound, pairwise=True, reasoning=sampled)  # bound may be ~N²: count, not list
        bound, planned = min(bound, all_pairs * per_pair), min(judgements, all_pairs * per_pair)
    calls_bound = bound * per_judgement
    return PlanFigures(
        comparisons_planned=comparisons, judgements_planned=judgements, calls_per_judgement=per_judgement,
        model_calls_planned=planned * per_judgement, model_calls_upper_bound=calls_bound,
        prompt_tokens_upper_bound=calls_bound * (overhead + per_call_texts),
    )
