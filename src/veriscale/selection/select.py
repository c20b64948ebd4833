"""Best-of-N with the verifier: render each run, judge pairs, fit Bradley–Terry, explain the pick.

    from veriscale.models.uri import load_backend
    from veriscale.selection.select import select
    from veriscale.verify.reward import Verifier

    verifier = Verifier(load_backend("embedded"), criteria="agent")
    sel = select(None, candidates, verifier=verifier)      # task taken from the runs themselves
    sel.best.id, sel.confidence, sel.reason.text, sel.usage.model_calls

**Rendering.** The task is rendered once (at most a quarter of the model's context) and every
candidate once with ``render_candidate`` under ``budget_tokens``, counted by the model's own
tokenizer. Default budget: the smaller of a per-backend cap (``EMBEDDED_RENDER_BUDGET`` for the
in-process model, tuned with ``benchmarks/bench_select_wall.py``: the README's Best-of-5
(k=2, 3 criteria) processes about 14k prompt tokens, a minute at ~230 tokens/s on 2 idle cores;
``SERVER_RENDER_BUDGET`` for servers) and what fits the context: instructions, task, the
longest criterion and *both* candidates of a pairwise prompt (one for ``pointwise``).

**Judging.** ``judge(i, j, repeat)`` is ``verifier.compare(task, text_i, text_j,
only_repeat=repeat).p_a_wins``: candidate ``i`` sits in slot A on even repeats, so slot order
alternates with the repeat index. Candidates whose rendered text is identical form one group
and are judged once. The tournaments (``veriscale.selection.tournament``) choose the pairs;
Bradley–Terry over every judgement gives the win mass, ranking and confidence.

**Repeats.** Without ``verifier.reasoning`` a pair has only two distinct computations (its two
slot orders); a third judgement would be a cache hit counted as fresh evidence. So then PPT
judges each comparison once (its ring already shows every candidate in both slots), round
robin and knockout at most twice, and adaptive mode re-judges a pair at most twice.

**Failures.** A comparison whose verdict failed (a model call failed after the backend's own
retries, or the model put no probability on any score label) stops the selection with
``SelectionFailed`` naming the pair and the errors; it is never counted as a tie. Finished calls
are in the store, so a rerun resumes and retries only what failed.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from veriscale.data.model import Candidate, Task
from veriscale.data.pool import require_single_task
from veriscale.data.render import MIN_BUDGET_TOKENS, render_candidate, render_task
from veriscale.engine.executor import Usage
from veriscale.errors import ModelCallError, UserError
from veriscale.selection.reason import Reason, explain
from veriscale.selection.tournament import (
    TournamentResult,
    knockout,
    pointwise,
    ppt,
    ppt_comparison_count,
    round_robin,
)
from veriscale.verify.prompts import pairwise_request, pointwise_request

METHODS = ("ppt", "round_robin", "knockout", "pointwise")
EMBEDDED_RENDER_BUDGET = 256  # README Best-of-5, k=2, agent criteria: ~10k prompt tokens processed (~50 s on 2 cores)
SERVER_RENDER_BUDGET = 6000
TASK_CONTEXT_SHARE = 0.25
PROMPT_RESERVE_TOKENS = 96  # chat-template tokens, a whitespace path at the slot, rounding
DEFAULT_REPEATS = {"ppt": 1, "round_robin": 2, "knockout": 2, "pointwise": 1}
ADAPTIVE_MAX_REPEATS_SAMPLED = 4
DISTINCT_SLOT_ORDERS = 2

Progress = Callable[[int, int], None]
"""``on_progress(calls_done, calls_planned)`` after every finished or cached model call; adaptive
extra repeats can take ``calls_done`` past ``calls_planned``."""


class SelectionFailed(ModelCallError):
    """A comparison had no verdict, so the selection stopped instead of guessing."""


@dataclass(frozen=True)
class SelectionPlan:
    """What a selection will cost, before any model call (``--dry-run``).

    ``judgements_planned × calls_per_judgement`` calls are asked (cache hits included);
    ``model_calls_planned``: the new ones the schedule can need without adaptive stopping
    (a pair judged again in a slot order it already had is a cache hit). ``model_calls_upper_bound``:
    the most it can take (adaptive extra repeats included); cached calls cost nothing and are
    not subtracted. ``prompt_tokens_upper_bound`` counts whole prompts; prefix reuse in the
    embedded model and in servers processes fewer.
    """

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

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data


@dataclass
class Selection:
    """The pick and everything behind it; candidate indices refer to ``candidates``.

    ``scores``: normalised Bradley–Terry win mass (pointwise: share of others beaten), summing
    to 1. ``confidence``: posterior probability that the pick is the best (1.0 for a single
    distinct candidate, None for pointwise). ``criteria_scores[i]``: candidate i's mean reward
    per criterion over the comparisons it took part in. ``calls_saved``: model calls adaptive
    mode did not make compared with the full schedule (negative if extra repeats cost more).
    """

    task: Task | None
    candidates: list[Candidate]
    method: str
    index: int
    scores: tuple[float, ...]
    ranking: tuple[int, ...]
    confidence: float | None
    reason: Reason
    ties: tuple[tuple[int, int], ...]
    n_comparisons: int
    n_judgements: int
    usage: Usage
    criteria_scores: list[dict[str, float | None]]
    min_confidence: float
    plan: SelectionPlan
    adaptive: bool = False
    judgements_saved: int = 0
    calls_saved: int = 0
    stop_reason: str = "plan complete"
    notes: list[str] = field(default_factory=list)
    tournament: TournamentResult | None = None

    @property
    def best(self) -> Candidate:
        return self.candidates[self.index]

    @property
    def decided(self) -> bool:
        """True when the confidence reaches ``min_confidence`` (pointwise picks never are)."""
        return self.confidence is not None and self.confidence >= self.min_confidence

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the tournament's judgements under ``"tournament"``)."""
        return {
            "task": None if self.task is None else {"id": self.task.id, "text": self.task.text},
            "method": self.method,
            "index": self.index,
            "best": _candidate_ref(self.best),
            "confidence": self.confidence,
            "min_confidence": self.min_confidence,
            "decided": self.decided,
            "reason": self.reason.to_dict(),
            "ranking": [
                {
                    "rank": rank + 1,
                    "index": i,
                    **_candidate_ref(self.candidates[i]),
                    "score": self.scores[i],
                    "criteria": self.criteria_scores[i],
                }
                for rank, i in enumerate(self.ranking)
            ],
            "ties": [list(t) for t in self.ties],
            "n_comparisons": self.n_comparisons,
            "n_judgements": self.n_judgements,
            "usage": self.usage.to_dict(),
            "adaptive": self.adaptive,
            "judgements_saved": self.judgements_saved,
            "calls_saved": self.calls_saved,
            "stop_reason": self.stop_reason,
            "notes": list(self.notes),
            "plan": self.plan.to_dict(),
            "tournament": None if self.tournament is None else self.tournament.to_dict(),
        }


@dataclass
class _Prepared:
    task: Task | None
    candidates: list[Candidate]
    task_text: str
    texts: list[str]
    groups: list[str]
    plan: SelectionPlan
    max_repeats: int


def plan_selection(
    task: Task | str | None,
    candidates: Sequence[Candidate],
    *,
    verifier: Any,
    method: str = "ppt",
    k: int = 2,
    adaptive: bool = True,
    budget_tokens: int | None = None,
    repeats: int | None = None,
) -> SelectionPlan:
    """The cost of ``select`` with these settings, without calling the model."""
    return _prepare(task, candidates, verifier, method, k, adaptive, budget_tokens, repeats).plan


def select(
    task: Task | str | None,
    candidates: Sequence[Candidate],
    *,
    verifier: Any,
    method: str = "ppt",
    k: int = 2,
    adaptive: bool = True,
    min_confidence: float = 0.9,
    budget_tokens: int | None = None,
    repeats: int | None = None,
    seed: int = 0,
    on_progress: Progress | None = None,
) -> Selection:
    """Pick the best of ``candidates`` for ``task`` (None: the task the candidates carry).

    ``method``: ``ppt`` (k pivots), ``round_robin``, ``knockout`` or ``pointwise``.
    ``adaptive`` (ppt, round robin): stop once the leader's confidence reaches
    ``min_confidence``. ``repeats``: judgements per comparison (None: 1 for PPT, 2 otherwise).
    ``verifier``: a ``Verifier`` (or anything with its ``compare``/``score``, ``model``,
    ``criteria``, ``scale``, ``reasoning``, ``repeats`` and ``usage``).
    """
    if not 0.0 < min_confidence <= 1.0:
        raise UserError(f"min_confidence={min_confidence!r} must be in (0, 1]: e.g. 0.9")
    prep = _prepare(task, candidates, verifier, method, k, adaptive, budget_tokens, repeats)
    plan = prep.plan
    notes = list(plan.notes)
    before = verifier.usage.copy()
    names = [c.name for c in verifier.criteria.items]
    candidates = prep.candidates

    if plan.n_distinct == 1:
        what = "one candidate" if len(candidates) == 1 else f"all {len(candidates)} candidates have the same output"
        notes.append(f"{what}: returned it without judging")
        return Selection(
            task=prep.task, candidates=candidates, method=method, index=0,
            scores=tuple(1.0 / len(candidates) for _ in candidates), ranking=tuple(range(len(candidates))),
            confidence=1.0, reason=explain(candidates[0].id, None, {}, {}, confidence=1.0),
            ties=tuple((a, b) for a in range(len(candidates)) for b in range(a + 1, len(candidates))),
            n_comparisons=0, n_judgements=0, usage=Usage(),
            criteria_scores=[{n: None for n in names} for _ in candidates], min_confidence=min_confidence,
            plan=plan, adaptive=adaptive, stop_reason="single candidate", notes=notes,
        )

    recorder = _Recorder(verifier, prep.task_text, prep.texts, candidates)
    restore = _attach_progress(verifier, on_progress, plan.judgements_planned * plan.calls_per_judgement)
    try:
        result = _run_tournament(prep, recorder, method, adaptive, min_confidence, seed)
    finally:
        restore()

    usage = verifier.usage.since(before)
    criteria_scores = recorder.criteria_scores(names, prep.groups)
    reason = _reason(result, candidates, criteria_scores, recorder, prep.groups)
    calls_saved = result.judgements_saved * plan.calls_per_judgement if result.adaptive else 0
    if recorder.low_label_mass:
        notes.append(
            f"{recorder.low_label_mass} of {recorder.verdicts} verdicts had low label mass (the model mostly "
            "answered off the score format): treat this pick with caution, or use a stronger --model"
        )
    if result.adaptive:
        notes.append(
            f"adaptive: stopped with '{result.stop_reason}' after {result.n_judgements} of "
            f"{result.judgements_planned} planned judgements ({calls_saved:+d} model calls saved)"
        )
    return Selection(
        task=prep.task, candidates=candidates, method=method, index=result.winner, scores=result.win_mass,
        ranking=result.ranking, confidence=result.confidence, reason=reason, ties=result.ties,
        n_comparisons=result.n_comparisons, n_judgements=result.n_judgements, usage=usage,
        criteria_scores=criteria_scores, min_confidence=min_confidence, plan=plan, adaptive=result.adaptive,
        judgements_saved=result.judgements_saved if result.adaptive else 0, calls_saved=calls_saved,
        stop_reason=result.stop_reason, notes=notes, tournament=result,
    )


# ---------------------------------------------------------------- preparation and budget


def _prepare(
    task: Task | str | None,
    candidates: Sequence[Candidate],
    verifier: Any,
    method: str,
    k: int,
    adaptive: bool,
    budget_tokens: int | None,
    repeats: int | None,
) -> _Prepared:
    if method not in METHODS:
        raise UserError(f"selection method '{method}' is unknown: use one of {', '.join(METHODS)}")
    if isinstance(task, str):
        task = Task(text=task)
    candidates = list(candidates)
    group = require_single_task(candidates, task)
    task = group.task
    if task is None or not task.text.strip():
        if len(candidates) > 1:
            raise UserError(
                "the candidates do not say what their task was: pass the task (a TASK file or --task FILE)"
            )
        task = task or Task(text="")
    fit = fit_prompt(verifier, task, budget_tokens, pairwise=method != "pointwise")
    notes: list[str] = list(fit.notes)
    task_text, budget, task_tokens, overhead = fit.task_text, fit.budget_tokens, fit.task_tokens, fit.overhead_tokens
    count = verifier.model.count_tokens

    texts = [render_candidate(c, budget, count) for c in candidates]
    groups = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
    n_distinct = len(set(groups))
    if n_distinct < len(candidates) and n_distinct > 1:
        notes.append(f"{len(candidates) - n_distinct} candidate(s) repeat another's output and are judged once with it")

    sampled = bool(getattr(verifier, "reasoning", False))
    wanted = DEFAULT_REPEATS[method] if repeats is None else repeats
    if not isinstance(wanted, int) or wanted < 1:
        raise UserError(f"repeats={repeats!r} must be a whole number >= 1")
    cap = DISTINCT_SLOT_ORDERS if method in ("round_robin", "knockout") else 1
    if method == "pointwise" or sampled:
        reps = wanted
    else:
        reps = min(wanted, cap)
        if reps < wanted:
            notes.append(
                f"repeats lowered from {wanted} to {reps}: without --reasoning further judgements of a pair "
                "repeat a slot order already judged"
            )
    max_repeats = max(ADAPTIVE_MAX_REPEATS_SAMPLED, reps) if sampled else DISTINCT_SLOT_ORDERS
    k_eff = None
    if method == "ppt":
        if not isinstance(k, int) or k < 1:
            raise UserError(f"k={k!r} pivots is not allowed: pass k >= 1 (e.g. 2)")
        k_eff = min(k, n_distinct)
        if k > n_distinct and n_distinct > 1:
            notes.append(f"k lowered from {k} to {k_eff}: there are only {n_distinct} distinct candidates")

    text_tokens = sorted((count(t) for t in set(texts)), reverse=True)
    plan = _plan(method, len(candidates), n_distinct, k_eff, reps, adaptive and method in ("ppt", "round_robin"),
                 budget, task_tokens, max_repeats, verifier, overhead,
                 text_tokens, notes)
    return _Prepared(task, candidates, task_text, texts, groups, plan, max_repeats)


@dataclass(frozen=True)
class PromptFit:
    """How a task and its candidates fit one judge prompt.

    ``task_text``: the task as shown (cut to a quarter of the context if longer).
    ``budget_tokens``: render budget per candidate. ``overhead_tokens``: the longest prompt
    without candidate text (instructions, task, criterion, question, template reserve).
    """

    task_text: str
    task_tokens: int
    budget_tokens: int
    overhead_tokens: int
    notes: tuple[str, ...] = ()


def fit_prompt(verifier: Any, task: Task, budget_tokens: int | None = None, *, pairwise: bool = True) -> PromptFit:
    """Fit ``task`` and one (pointwise) or two (pairwise) candidates into the model's context.

    ``budget_tokens`` None picks the default (see the module docstring); a given budget that
    cannot fit raises a ``UserError`` naming the largest one that does.
    """
    model = verifier.model
    count = model.count_tokens
    context = model.context_size()
    slots = 2 if pairwise else 1
    notes = []
    task_text = render_task(task)
    share = int(context * TASK_CONTEXT_SHARE) if context else None
    if share and task_text and count(task_text) > share:
        task_text = render_task(task, share, count)
        notes.append(f"the task was cut to {share} tokens (its middle elided) to fit the model's context")
    task_tokens = count(task_text) if task_text else 0
    overhead = _prompt_overhead(verifier, task_text or "-", pairwise=pairwise)
    room = (context - overhead) // slots if context else None
    budget = _resolve_budget(budget_tokens, room, getattr(model, "is_embedded", False), context, slots)
    return PromptFit(task_text, task_tokens, budget, overhead, tuple(notes))


def _resolve_budget(budget_tokens: int | None, room: int | None, embedded: bool, context: int | None,
                    slots: int) -> int:
    if budget_tokens is None:
        default = EMBEDDED_RENDER_BUDGET if embedded else SERVER_RENDER_BUDGET
        budget = default if room is None else min(default, room)
    else:
        if not isinstance(budget_tokens, int) or budget_tokens < MIN_BUDGET_TOKENS:
            raise UserError(f"--budget-tokens {budget_tokens!r} is too small: give at least {MIN_BUDGET_TOKENS}")
        if room is not None and budget_tokens > room:
            where = "both candidates of a pairwise prompt" if slots == 2 else "the candidate"
            raise UserError(
                f"--budget-tokens {budget_tokens} does not fit the model's {context}-token context with the "
                f"task and instructions ({where}): use at most {room}"
            )
        budget = budget_tokens
    if budget < MIN_BUDGET_TOKENS:
        raise UserError(
            f"the task and instructions leave {max(budget, 0)} tokens per candidate in the model's {context}-token "
            "context: shorten the task or use a model with a longer context"
        )
    return budget


def _prompt_overhead(verifier: Any, task_text: str, *, pairwise: bool) -> int:
    """Tokens of the longest prompt without the candidates' text (the task included)."""
    crit = max(verifier.criteria.items, key=lambda c: len(c.description) + len(c.name))
    reasoning = bool(getattr(verifier, "reasoning", False))
    if pairwise:
        req = pairwise_request(task_text, "", "", crit, verifier.criteria.note, verifier.scale,
                               target="B", reasoning=reasoning)
    else:
        req = pointwise_request(task_text, "", crit, verifier.criteria.note, verifier.scale, reasoning=reasoning)
    text = "\n".join(m.content for m in req.messages) + "\n" + req.prefill
    extra = req.max_reasoning_tokens + 8 if reasoning else 0
    return verifier.model.count_tokens(text) + PROMPT_RESERVE_TOKENS + extra


def _plan(method: str, n_candidates: int, n: int, k: int | None, repeats: int, adaptive: bool, budget: int,
          task_tokens: int, max_repeats: int, verifier: Any, overhead: int, text_tokens: list[int],
          notes: list[str]) -> SelectionPlan:
    n_criteria = len(verifier.criteria.items)
    sampled = bool(getattr(verifier, "reasoning", False))
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
        per_judgement = n_criteria * (getattr(verifier, "repeats", 1) if sampled else 1)
    else:
        per_judgement = 2 * n_criteria
    planned_calls = judgements
    if not sampled and method != "pointwise" and n > 1:
        distinct = all_pairs * DISTINCT_SLOT_ORDERS  # judging a pair again in the same order is a cache hit
        bound, planned_calls = min(bound, distinct), min(judgements, distinct)
    calls_bound = bound * per_judgement
    return SelectionPlan(
        method=method, n_candidates=n_candidates, n_distinct=n, k=k, repeats=repeats, adaptive=adaptive,
        budget_tokens=budget, task_tokens=task_tokens, comparisons_planned=comparisons,
        judgements_planned=judgements, calls_per_judgement=per_judgement,
        model_calls_planned=planned_calls * per_judgement, model_calls_upper_bound=calls_bound,
        prompt_tokens_upper_bound=calls_bound * (overhead + per_call_texts), notes=tuple(notes),
    )


# ---------------------------------------------------------------- running


class _Recorder:
    """The judge and score functions handed to the tournaments; keeps per-criterion rewards."""

    def __init__(self, verifier: Any, task_text: str, texts: list[str], candidates: list[Candidate]) -> None:
        self.verifier = verifier
        self.task_text = task_text
        self.texts = texts
        self.candidates = candidates
        self.rewards: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.preferences: dict[tuple[int, int], list[float]] = defaultdict(list)
        self.verdicts = 0
        self.low_label_mass = 0  # verdicts where the model put little probability on the labels

    def judge(self, i: int, j: int, repeat: int) -> float:
        result = self.verifier.compare(self.task_text, self.texts[i], self.texts[j], only_repeat=repeat)
        if result.failed or result.p_a_wins is None:
            raise SelectionFailed(
                f"comparing {self.candidates[i].id} with {self.candidates[j].id} gave no verdict "
                f"({'; '.join(result.errors[:3]) or 'no score on some criterion'}): the selection stopped "
                "rather than count it as a tie; finished calls are saved, so rerun to retry the failed ones"
            )
        for name, entry in result.criteria.items():
            if entry.get("reward_a") is not None:
                self.rewards[i][name].append(entry["reward_a"])
            if entry.get("reward_b") is not None:
                self.rewards[j][name].append(entry["reward_b"])
        self.preferences[(i, j)].append(result.p_a_wins)
        self.verdicts += 1
        self.low_label_mass += bool(result.low_label_mass)
        return result.p_a_wins

    def score(self, i: int) -> float:
        result = self.verifier.score(self.task_text, self.texts[i])
        if result.failed or result.reward is None:
            raise SelectionFailed(
                f"scoring {self.candidates[i].id} gave no verdict ({'; '.join(result.errors[:3]) or 'no score'}): "
                "the selection stopped; finished calls are saved, so rerun to retry the failed ones"
            )
        for name, entry in result.criteria.items():
            if entry.get("reward") is not None:
                self.rewards[i][name].append(entry["reward"])
        self.verdicts += 1
        self.low_label_mass += bool(result.low_label_mass)
        return result.reward

    def head_to_head(self, a: int, b: int) -> float | None:
        """Mean P(a beats b) over their direct judgements, or None if they never met."""
        values = self.preferences.get((a, b), []) + [1.0 - p for p in self.preferences.get((b, a), [])]
        return sum(values) / len(values) if values else None

    def criteria_scores(self, names: list[str], groups: list[str]) -> list[dict[str, float | None]]:
        """Per candidate, mean reward per criterion; members of a group share its representative's."""
        first_of = {}
        for index, g in enumerate(groups):
            first_of.setdefault(g, index)
        out = []
        for index, g in enumerate(groups):
            rep = first_of[g]
            row = self.rewards.get(rep, {})
            out.append({n: (sum(row[n]) / len(row[n]) if row.get(n) else None) for n in names})
        return out


def _run_tournament(prep: _Prepared, recorder: _Recorder, method: str, adaptive: bool,
                    min_confidence: float, seed: int) -> TournamentResult:
    n = len(prep.candidates)
    plan = prep.plan
    if method == "pointwise":
        return pointwise(n, recorder.score, groups=prep.groups)
    if method == "knockout":
        return knockout(n, recorder.judge, repeats=plan.repeats, groups=prep.groups, seed=seed)
    common = dict(repeats=plan.repeats, adaptive=adaptive, min_confidence=min_confidence,
                  max_repeats=max(prep.max_repeats, plan.repeats), groups=prep.groups, seed=seed)
    if method == "round_robin":
        return round_robin(n, recorder.judge, **common)
    return ppt(n, recorder.judge, k=plan.k or 1, **common)


def _reason(result: TournamentResult, candidates: list[Candidate], scores: list[dict[str, float | None]],
            recorder: _Recorder, groups: list[str]) -> Reason:
    winner = result.winner
    runner = next((i for i in result.ranking if groups[i] != groups[winner]), None)
    if runner is None:
        return explain(candidates[winner].id, None, {}, {}, confidence=result.confidence)
    return explain(
        candidates[winner].id, candidates[runner].id, scores[winner], scores[runner],
        head_to_head=recorder.head_to_head(winner, runner), confidence=result.confidence,
    )


def _attach_progress(verifier: Any, on_progress: Progress | None, planned: int) -> Callable[[], None]:
    """Chain ``on_progress`` onto the executor's per-call callback; returns the undo function."""
    executor = getattr(verifier, "executor", None)
    if on_progress is None or executor is None:
        return lambda: None
    previous = executor.on_done
    done = 0

    def on_done(outcome: Any) -> None:
        nonlocal done
        done += 1
        if previous is not None:
            previous(outcome)
        on_progress(done, planned)

    executor.on_done = on_done

    def restore() -> None:
        executor.on_done = previous

    return restore




def _candidate_ref(candidate: Candidate) -> dict[str, Any]:
    return {"id": candidate.id, "source": candidate.source, "labels": candidate.labels}
