"""Which steps of a trajectory fit a token budget, with a marker for each run of steps left out.

    from veriscale.data.step_selection import render_steps, steps_marker

    render_steps(steps, budget=3000, count=estimate_tokens)   # "[step 1] ...\n\n[... 37 steps elided (steps 2–38) ...]\n\n..."
    steps_marker(5, 41)                                        # "[... 37 steps elided (steps 5–41) ...]"

All steps stay when they fit (the long ones then get what is left of the budget). Otherwise the
last steps always stay (shrunk, then fewer), then by priority: the first step, the steps with
error signals (latest first), the other steps (latest first).
"""

from __future__ import annotations

from veriscale.data.model import Step
from veriscale.data.step_text import has_error_signal, render_step
from veriscale.data.truncate import TokenCounter, measure_with

LAST_STEPS_KEPT = 3
STEP_SHARE = 0.125  # a single step gets at most this share before its parts are truncated
MIN_STEP_TOKENS = 40


def steps_marker(first: int, last: int) -> str:
    count = last - first + 1
    noun = "step" if count == 1 else "steps"
    span = f"step {first}" if count == 1 else f"steps {first}–{last}"
    return f"[... {count} {noun} elided ({span}) ...]"


def render_steps(steps: list[Step], budget: int, count: TokenCounter) -> str:
    """Steps within ``budget``: all of them when they fit, else chosen by priority with markers."""
    n = len(steps)
    measure = measure_with(count)
    separator = measure("\n\n") or 1
    step_cap = max(int(budget * STEP_SHARE), MIN_STEP_TOKENS)
    at_cap = [render_step(i + 1, step, step_cap, count) for i, step in enumerate(steps)]
    costs = [measure(text) + separator for text in at_cap]
    if sum(costs) <= budget:
        return "\n\n".join(_fill_all(steps, at_cap, costs, budget, step_cap, count, separator))
    marker_tokens = measure(steps_marker(n, n * 10)) + separator

    # The last steps always stay: shrink them, then keep fewer, until they fit.
    mandatory = list(range(max(0, n - LAST_STEPS_KEPT), n))
    cap = step_cap
    pieces: dict[int, str] = {}
    while True:
        pieces = {i: at_cap[i] if cap == step_cap else render_step(i + 1, steps[i], cap, count) for i in mandatory}
        selected = [i in pieces for i in range(n)]
        used = sum(measure(t) + separator for t in pieces.values()) + _count_gaps(selected) * marker_tokens
        if used <= budget:
            break
        if cap > MIN_STEP_TOKENS:
            cap = max(cap // 2, MIN_STEP_TOKENS)
        elif len(mandatory) > 1:
            mandatory.pop(0)
        else:
            break  # the caller truncates the whole text as a last resort

    for i in _priority_order(steps, set(mandatory)):
        if budget - used < MIN_STEP_TOKENS // 2:
            break
        cost = costs[i]
        left_gap = i > 0 and not selected[i - 1]
        right_gap = i < n - 1 and not selected[i + 1]
        gap_change = 1 if (left_gap and right_gap) else (-1 if not (left_gap or right_gap) else 0)
        if used + cost + gap_change * marker_tokens <= budget:
            selected[i] = True
            pieces[i] = at_cap[i]
            used += cost + gap_change * marker_tokens

    blocks: list[str] = []
    i = 0
    while i < n:
        if selected[i]:
            blocks.append(pieces[i])
            i += 1
            continue
        start = i
        while i < n and not selected[i]:
            i += 1
        blocks.append(steps_marker(start + 1, i))
    return "\n\n".join(blocks)


def _fill_all(
    steps: list[Step],
    at_cap: list[str],
    costs: list[int],
    budget: int,
    step_cap: int,
    count: TokenCounter,
    separator: int,
) -> list[str]:
    """Every step fits at ``step_cap``: raise the cap of the truncated ones to use the budget."""
    measure = measure_with(count)
    full_costs = list(costs)
    long_steps = [i for i, cost in enumerate(costs) if cost >= step_cap // 2]
    for i in long_steps:
        full_costs[i] = measure(render_step(i + 1, steps[i], budget, count)) + separator
    if sum(full_costs) == sum(costs):
        return at_cap
    low, high = step_cap, budget  # largest level with sum(min(cost, level)) <= budget
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(c, mid) for c in full_costs) <= budget:
            low = mid
        else:
            high = mid - 1
    level = low
    while level > step_cap:
        rendered = list(at_cap)
        for i in long_steps:
            rendered[i] = render_step(i + 1, steps[i], level - separator, count)
        if sum(measure(t) + separator for t in rendered) <= budget:
            return rendered
        level = max(step_cap, int(level * 0.9))
    return at_cap


def _count_gaps(selected: list[bool]) -> int:
    gaps = 0
    previous = True
    for flag in selected:
        if not flag and previous:
            gaps += 1
        previous = flag
    return gaps


def _priority_order(steps: list[Step], taken: set[int]) -> list[int]:
    """Indices after the mandatory ones: first step, error steps (latest first), the rest (latest first)."""
    n = len(steps)
    order: list[int] = []
    if 0 not in taken:
        order.append(0)
    errors = [i for i in range(n - 1, -1, -1) if i not in taken and i != 0 and has_error_signal(steps[i])]
    error_set = set(errors)
    others = [i for i in range(n - 1, 0, -1) if i not in taken and i not in error_set]
    return order + errors + others
