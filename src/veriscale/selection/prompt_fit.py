"""How a task and one or two candidates fit one judge prompt: the render budget per candidate.

    fit = fit_prompt(verifier, task, pairwise=True)
    fit.task_text, fit.budget_tokens, fit.overhead_tokens

The task is shown whole, or cut to a quarter of the context (``TASK_CONTEXT_SHARE``) if longer.
Default budget: the smaller of a per-backend cap (``EMBEDDED_RENDER_BUDGET`` for the in-process
model, tuned with ``benchmarks/bench_select_wall.py``: the README's Best-of-5 (k=2, 3 criteria)
processes about 14k prompt tokens, a minute at ~230 tokens/s on 2 idle cores;
``SERVER_RENDER_BUDGET`` for servers) and what fits the context: instructions, task, the
longest criterion and *both* candidates of a pairwise prompt (one for pointwise). A given
budget that cannot fit raises a ``UserError`` naming the largest one that does.
"""

from __future__ import annotations

from dataclasses import dataclass

from veriscale.data.model import Task
from veriscale.data.render import MIN_BUDGET_TOKENS
from veriscale.data.truncate import TokenCounter
from veriscale.errors import UserError, setting
from veriscale.selection.rendering import Renderer
from veriscale.selection.verifier_seam import SelectionVerifier
from veriscale.verify.prompts import pairwise_request, pointwise_request

EMBEDDED_RENDER_BUDGET = 256  # README Best-of-5, k=2, agent criteria: ~10k prompt tokens processed (~50 s on 2 cores)
SERVER_RENDER_BUDGET = 6000
TASK_CONTEXT_SHARE = 0.25
PROMPT_RESERVE_TOKENS = 96  # chat-template tokens, a whitespace path at the slot, rounding


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


def fit_prompt(verifier: SelectionVerifier, task: Task, budget_tokens: int | None = None, *, pairwise: bool = True,
               renderer: Renderer | None = None) -> PromptFit:
    """Fit ``task`` and one (pointwise) or two (pairwise) candidates into the model's context.

    ``renderer``: the plan's renderer for ``verifier.model`` (None: a fresh one).
    """
    model = verifier.model
    renderer = renderer or Renderer.for_model(model)
    count = renderer.count
    context = model.context_size()
    slots = 2 if pairwise else 1
    notes = []
    task_text = renderer.task(task)
    share = int(context * TASK_CONTEXT_SHARE) if context else None
    if share and task_text and count(task_text) > share:
        task_text = renderer.task(task, share)
        notes.append(f"the task was cut to {share} tokens (its middle elided) to fit the model's context")
    task_tokens = count(task_text) if task_text else 0
    overhead = _prompt_overhead(verifier, task_text or "-", count, pairwise=pairwise)
    room = (context - overhead) // slots if context else None
    budget = _resolve_budget(budget_tokens, room, model.is_embedded, context, slots)
    return PromptFit(task_text, task_tokens, budget, overhead, tuple(notes))


def _resolve_budget(budget_tokens: int | None, room: int | None, embedded: bool, context: int | None,
                    slots: int) -> int:
    if budget_tokens is None:
        default = EMBEDDED_RENDER_BUDGET if embedded else SERVER_RENDER_BUDGET
        budget = default if room is None else min(default, room)
    else:
        if not isinstance(budget_tokens, int) or budget_tokens < MIN_BUDGET_TOKENS:
            raise UserError(f"{setting('budget_tokens')} {budget_tokens!r} is too small: give at least {MIN_BUDGET_TOKENS}")
        if room is not None and budget_tokens > room:
            where = "both candidates of a pairwise prompt" if slots == 2 else "the candidate"
            raise UserError(
                f"{setting('budget_tokens')} {budget_tokens} does not fit the model's {context}-token context with the "
                f"task and instructions ({where}): use at most {room}"
            )
        budget = budget_tokens
    if budget < MIN_BUDGET_TOKENS:
        raise UserError(
            f"the task and instructions leave {max(budget, 0)} tokens per candidate in the model's {context}-token "
            "context: shorten the task or use a model with a longer context"
        )
    return budget


def _prompt_overhead(verifier: SelectionVerifier, task_text: str, count: TokenCounter, *, pairwise: bool) -> int:
    """Tokens of the longest prompt without the candidates' text (the task included)."""
    crit = max(verifier.criteria.items, key=lambda c: len(c.description) + len(c.name))
    reasoning = verifier.reasoning
    if pairwise:
        req = pairwise_request(task_text, "", "", crit, verifier.criteria.note, verifier.scale,
                               target="B", reasoning=reasoning)
    else:
        req = pointwise_request(task_text, "", crit, verifier.criteria.note, verifier.scale, reasoning=reasoning)
    text = "\n".join(m.content for m in req.messages) + "\n" + req.prefill
    extra = req.max_reasoning_tokens + 8 if reasoning else 0
    return count(text) + PROMPT_RESERVE_TOKENS + extra
