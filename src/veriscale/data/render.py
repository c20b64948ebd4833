"""Render tasks and candidate runs as verifier-prompt text that fits a token budget.

    from veriscale.data.render import render_candidate, render_task, render_run

    text = render_candidate(candidate, budget_tokens=6000)
    text = render_candidate(candidate, 6000, count_tokens=lambda s: len(tok.encode(s)))
    prompt_part = render_run(task, candidate, budget_tokens=8000)   # task first, then the run

A trajectory that does not fit keeps, in this order of priority: the final output, the last
steps, the first step, the steps with error signals (non-zero exit code, "Traceback",
"error", "failed", ...), then the most recent other steps (which steps: ``step_selection.py``;
one step's text: ``step_text.py``). Steps left out are replaced by markers such as
``[... 37 steps elided (steps 5–41) ...]``; a huge message or observation keeps its head and tail
around ``[... 81,234 characters elided ...]`` (``truncate.py``).

Token counts come from ``count_tokens`` (any ``str -> int``); the default,
``estimate_tokens``, assumes 4 characters per token. The same input always gives the same
text, and the result never counts more than ``budget_tokens`` by the counter given.

A ``veriscale.data.token_spans.TokenSpans`` with token ids (a server's tokenizer) is not asked to
count every cut a search tries: a candidate's whole text is tokenised once, each part is cut at the
token offsets of that tokenisation (``Counted`` texts carry their estimated count), and only the
rendered candidate (and task) is counted again, exactly, to hold the budget by the tokenizer's own
count; ``truncate_middle`` and ``render_step`` alone hold it by the offsets' estimate.
"""

from __future__ import annotations

from veriscale.data.model import Candidate, Step, Task
from veriscale.data.step_selection import render_steps
from veriscale.data.step_text import step_lines, step_parts
from veriscale.data.token_spans import spans_of
from veriscale.data.truncate import (
    SAMPLE_CHARS,
    TokenCounter,
    estimate_tokens,
    fit_exactly,
    joined,
    measure_with,
    truncate_middle,
)
from veriscale.errors import UserError

MIN_BUDGET_TOKENS = 48
FINAL_OUTPUT_SHARE = 0.3  # at most this share of the budget goes to the final output
FINAL_HEADER = "[final output]"


def _check_budget(budget_tokens: int) -> None:
    if not isinstance(budget_tokens, int) or budget_tokens < MIN_BUDGET_TOKENS:
        raise UserError(
            f"token budget {budget_tokens!r} is too small to render a run: give at least "
            f"{MIN_BUDGET_TOKENS} tokens"
        )


def render_task(
    task: Task, budget_tokens: int | None = None, count_tokens: TokenCounter = estimate_tokens
) -> str:
    """The task text, truncated head+tail when a ``budget_tokens`` is given and exceeded."""
    text = task.text.strip()
    if budget_tokens is None:
        return text
    _check_budget(budget_tokens)
    spans = spans_of(count_tokens)
    if spans is not None:
        return fit_exactly(text, budget_tokens, spans)
    return truncate_middle(text, budget_tokens, count_tokens)


def _sampled(text: str) -> str:
    """What of ``text`` an offset cut tokenises: all of it, or its head and tail (``SAMPLE_CHARS`` each)."""
    return text if len(text) <= 2 * SAMPLE_CHARS else f"{text[:SAMPLE_CHARS]}\n{text[-SAMPLE_CHARS:]}"


def _uncut_text(steps: list[Step], final: str) -> str:
    """Every step uncut (huge parts as their head and tail), then the final output: what a candidate's
    parts are cut from, tokenised once."""
    blocks = ["\n".join(step_lines(*(_sampled(p) for p in step_parts(i + 1, step))))
              for i, step in enumerate(steps)]
    return "\n\n".join(blocks + ([f"{FINAL_HEADER}\n{_sampled(final)}"] if final else []))


def render_candidate(
    candidate: Candidate,
    budget_tokens: int,
    count_tokens: TokenCounter = estimate_tokens,
) -> str:
    """What the verifier reads about one run, within ``budget_tokens``.

    A candidate without trajectory steps renders as its text (or final output). Otherwise
    steps are rendered as ``[step N] role``, tool calls (``$ command``), ``[output, exit
    code N]`` and the output, followed by ``[final output]`` when it differs from the last
    step's message.
    """
    _check_budget(budget_tokens)
    trajectory = candidate.trajectory
    final = (trajectory.final_output if trajectory and trajectory.final_output else candidate.text).strip()
    steps = trajectory.steps if trajectory else []
    spans = spans_of(count_tokens)
    if not steps:
        if not final:
            return "[no output]"
        return fit_exactly(final, budget_tokens, spans) if spans else truncate_middle(final, budget_tokens, count_tokens)

    last_agent_text = next((s.text.strip() for s in reversed(steps) if s.role == "agent"), "")
    shown_final = final if final and final != last_agent_text else ""
    if spans is None:
        return _steps_and_final(steps, shown_final, budget_tokens, count_tokens)
    with spans.primed(_uncut_text(steps, shown_final)):  # the candidate tokenised once; its parts cut off it
        return _steps_and_final(steps, shown_final, budget_tokens, spans)


def _steps_and_final(steps: list[Step], final: str, budget_tokens: int, count: TokenCounter) -> str:
    measure = measure_with(count)
    final_section = ""
    if final:
        body = truncate_middle(final, int(budget_tokens * FINAL_OUTPUT_SHARE), count)
        final_section = joined("\n", [FINAL_HEADER, body], count) if body else ""
    remaining = budget_tokens - (measure(final_section) + 1 if final_section else 0)
    spans = spans_of(count)
    result, limit = "", remaining
    for factor in (1.0, 0.9, 0.75, 0.6):  # a counter need not be additive over pieces
        if spans is None:
            limit = int(remaining * factor)
        text = render_steps(steps, limit, count)
        result = f"{text}\n\n{final_section}" if final_section and text else (text or final_section)
        over = count(str(result)) - budget_tokens  # the exact count, even of a Counted text
        if over <= 0:
            return str(result)
        limit -= over  # offsets' counts are near the tokenizer's: take off what it found over
    return fit_exactly(result, budget_tokens, spans) if spans else truncate_middle(result, budget_tokens, count)


def render_run(
    task: Task,
    candidate: Candidate,
    budget_tokens: int,
    count_tokens: TokenCounter = estimate_tokens,
    task_share: float = 0.3,
) -> str:
    """Task then run, within ``budget_tokens``; the task takes at most ``task_share`` of it."""
    _check_budget(budget_tokens)
    task_text = render_task(task, max(int(budget_tokens * task_share), MIN_BUDGET_TOKENS), count_tokens)
    task_block = f"## Task\n{task_text}\n\n## Run\n"
    run_budget = budget_tokens - count_tokens(task_block)
    if run_budget < MIN_BUDGET_TOKENS:
        raise UserError(
            f"token budget {budget_tokens} leaves no room for the run after the task: raise it"
        )
    result = task_block + render_candidate(candidate, run_budget, count_tokens)
    if count_tokens(result) > budget_tokens:
        spans = spans_of(count_tokens)
        result = fit_exactly(result, budget_tokens, spans) if spans else truncate_middle(result, budget_tokens, count_tokens)
    return result
