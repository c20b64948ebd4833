"""Render tasks and candidate runs as verifier-prompt text that fits a token budget.

    from veriscale.data.render import render_candidate, render_task, render_run

    text = render_candidate(candidate, budget_tokens=6000)
    text = render_candidate(candidate, 6000, count_tokens=lambda s: len(tok.encode(s)))
    prompt_part = render_run(task, candidate, budget_tokens=8000)   # task first, then the run

A trajectory that does not fit keeps, in this order of priority: the final output, the last
steps, the first step, the steps with error signals (non-zero exit code, "Traceback",
"error", "failed", ...), then the most recent other steps. Steps left out are replaced by
markers such as ``[... 37 steps elided (steps 5–41) ...]``; a huge message or observation
keeps its head and tail around ``[... 81,234 characters elided ...]``.

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

import json
from typing import Callable

from veriscale.data.model import Candidate, Step, Task
from veriscale.data.token_spans import Counted, TokenSpans, spans_of
from veriscale.errors import UserError

TokenCounter = Callable[[str], int]

MIN_BUDGET_TOKENS = 48
CHARS_PER_TOKEN_ESTIMATE = 4
LAST_STEPS_KEPT = 3
FINAL_OUTPUT_SHARE = 0.3  # at most this share of the budget goes to the final output
FINAL_HEADER = "[final output]"
STEP_SHARE = 0.125  # a single step gets at most this share before its parts are truncated
MIN_STEP_TOKENS = 40
_MAX_CHARS_PER_TOKEN = 16  # for pre-cutting huge text before a (possibly slow) tokenizer sees it
#: Cutting at token offsets: a text longer than twice this is tokenised as its head and tail this long.
SAMPLE_CHARS = 100_000

ERROR_SIGNALS = (
    "traceback",
    "error",
    "fail",
    "exception",
    "not found",
    "no such file",
    "segmentation fault",
    "timed out",
    "panic",
    "fatal:",
)
_SHELL_TOOLS = ("bash", "bash_command", "shell", "terminal", "execute_bash", "run_shell")
_COMMAND_KEYS = ("command", "cmd", "keystrokes", "code", "script", "input")


def estimate_tokens(text: str) -> int:
    """Token estimate of ``text``: one token per 4 characters, rounded up (no tokenizer needed)."""
    return (len(text) + CHARS_PER_TOKEN_ESTIMATE - 1) // CHARS_PER_TOKEN_ESTIMATE


def _check_budget(budget_tokens: int) -> None:
    if not isinstance(budget_tokens, int) or budget_tokens < MIN_BUDGET_TOKENS:
        raise UserError(
            f"token budget {budget_tokens!r} is too small to render a run: give at least "
            f"{MIN_BUDGET_TOKENS} tokens"
        )


def _elision_marker(chars: int) -> str:
    return f"\n[... {chars:,} characters elided ...]\n"


def truncate_middle(
    text: str,
    max_tokens: int,
    count_tokens: TokenCounter = estimate_tokens,
    head_share: float = 0.5,
) -> str:
    """``text`` if it fits ``max_tokens``; else its head and tail around an elision marker.

    Cuts prefer line boundaries near the cut point. Returns "" when ``max_tokens`` cannot
    even hold the marker.
    """
    if max_tokens <= 0:
        return ""
    spans = spans_of(count_tokens)
    if spans is not None:
        cut = _cut_at_offsets(text, max_tokens, spans, head_share)
        if cut is not None:
            return cut
    precut_chars = max_tokens * _MAX_CHARS_PER_TOKEN
    sample = text[:precut_chars]
    sample_tokens = count_tokens(sample)
    if len(sample) == len(text) and sample_tokens <= max_tokens:
        return text
    if count_tokens(_elision_marker(len(text))) >= max_tokens:
        return ""
    chars_per_token = max(len(sample) / max(sample_tokens, 1), 0.25)
    keep = int(max_tokens * chars_per_token * 0.95)
    while keep > 0:
        candidate = _cut_middle(text, keep, head_share)
        if count_tokens(candidate) <= max_tokens:
            return candidate
        keep = int(keep * 0.85)
    return ""


def _cut_at_offsets(text: str, max_tokens: int, spans: TokenSpans, head_share: float) -> str | None:
    """``truncate_middle`` at token offsets: the first and last tokens of ``text`` (tokenised once) around
    the marker, with the same line-boundary preference; a ``Counted`` text. None: no offsets."""
    whole = len(text) <= 2 * SAMPLE_CHARS
    head_src, tail_src = (text, text) if whole else (text[:SAMPLE_CHARS], text[-SAMPLE_CHARS:])
    head_offs = spans.offsets(head_src)
    tail_offs = head_offs if whole else spans.offsets(tail_src)
    if head_offs is None or tail_offs is None:
        return None
    if whole and len(head_offs) <= max_tokens:
        return text
    marker = spans.measure(_elision_marker(int("9" * len(str(len(text))))))  # no elided count has more digits
    room = max_tokens - marker
    if marker >= max_tokens or room <= 0:
        return ""
    n_head, n_tail = len(head_offs), len(tail_offs)
    # a sample's last (head) or first (tail) token may be cut in two: never keep it
    head_n = min(int(room * head_share), n_head - (0 if whole else 1))
    tail_n = min(room - int(room * head_share), n_tail - (0 if whole else 1))
    head_end = head_offs.starts[head_n] if head_n < n_head else len(head_src)
    shift = len(text) - len(tail_src)
    tail_start = shift + (tail_offs.ends[n_tail - tail_n - 1] if tail_n < n_tail else 0)
    head = text[:head_end]
    newline = head.rfind("\n")
    if newline > head_end * 0.8:
        head = head[: newline + 1]
    tail = text[tail_start:]
    newline = tail.find("\n")
    if 0 <= newline < len(tail) * 0.2:
        tail = tail[newline + 1:]
    tokens = head_offs.overlapping(0, len(head)) + marker + tail_offs.overlapping(len(text) - len(tail) - shift,
                                                                                 len(tail_src))
    # the joins around the marker may tokenise a little differently: the rendered candidate is counted exactly
    return Counted(head + _elision_marker(len(text) - len(head) - len(tail)) + tail, tokens)


def _fit_exactly(text: str, budget: int, spans: TokenSpans) -> str:
    """``text`` cut at offsets until the tokenizer's own count of it is within ``budget``."""
    limit = budget
    while limit > 0:
        cut = str(truncate_middle(text, limit, spans))
        over = spans(cut) - budget
        if over <= 0:
            return cut
        limit -= max(over, limit // 10, 1)
    return ""


def _measure(count: TokenCounter) -> TokenCounter:
    """The counter render's searches use: a TokenSpans' cheap ``measure`` when it cuts by offsets."""
    spans = spans_of(count)
    return spans.measure if spans is not None else count


def _joined(separator: str, parts: list[str], count: TokenCounter) -> str:
    """``separator.join(parts)``; with a TokenSpans that cuts by offsets, ``Counted`` with the parts' sum."""
    text = separator.join(parts)
    spans = spans_of(count)
    if spans is None or not parts:
        return text
    return Counted(text, sum(spans.measure(p) for p in parts) + (len(parts) - 1) * max(spans.measure(separator), 1))


def _cut_middle(text: str, keep_chars: int, head_share: float) -> str:
    head_len = int(keep_chars * head_share)
    tail_len = keep_chars - head_len
    head = text[:head_len]
    newline = head.rfind("\n")
    if newline > head_len * 0.8:
        head = head[: newline + 1]
    tail = text[len(text) - tail_len:] if tail_len > 0 else ""
    newline = tail.find("\n")
    if 0 <= newline < tail_len * 0.2:
        tail = tail[newline + 1:]
    elided = len(text) - len(head) - len(tail)
    return head + _elision_marker(elided) + tail


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
        return _fit_exactly(text, budget_tokens, spans)
    return truncate_middle(text, budget_tokens, count_tokens)


def has_error_signal(step: Step) -> bool:
    """True when a step failed visibly: non-zero exit code or an error word in its output."""
    if step.exit_code not in (None, 0):
        return True
    observation = (step.observation if step.role == "agent" else step.observation or step.text).lower()
    return any(signal in observation for signal in ERROR_SIGNALS)


def _call_text(call: dict) -> str:
    name = str(call.get("name") or "tool")
    arguments = call.get("arguments")
    if isinstance(arguments, dict):
        for key in _COMMAND_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and value.strip():
                rest = {k: v for k, v in arguments.items() if k != key and k not in ("duration",)}
                extra = f"  {json.dumps(rest, sort_keys=True, ensure_ascii=False)}" if rest else ""
                prefix = "$" if name in _SHELL_TOOLS else f"{name}:"
                return f"{prefix} {value.strip()}{extra}"
        return f"{name}({json.dumps(arguments, sort_keys=True, ensure_ascii=False)})"
    return f"{name}({arguments})" if arguments else f"{name}()"


def _command_in_text(call: dict, text: str) -> bool:
    arguments = call.get("arguments")
    if not isinstance(arguments, dict) or not text:
        return False
    command = next((arguments[k] for k in _COMMAND_KEYS if isinstance(arguments.get(k), str)), "")
    return bool(command.strip()) and command.strip() in text


def _step_parts(number: int, step: Step) -> tuple[str, str, str, str, str]:
    """A step's header, message, tool calls, output header and output, uncut."""
    header = f"[step {number}] {step.role}"
    # A command the message already shows (mini-swe-agent's ```bash blocks) is not repeated.
    calls = "\n".join(
        _call_text(c) for c in step.tool_calls if not _command_in_text(c, step.text)
    )
    obs_header = ""
    if step.observation or step.exit_code is not None:
        code = f", exit code {step.exit_code}" if step.exit_code is not None else ""
        obs_header = f"[output{code}]"
    return header, step.text.strip(), calls, obs_header, step.observation.strip()


def _step_lines(header: str, text: str, calls: str, obs_header: str, observation: str) -> list[str]:
    lines = [header] + [p for p in (text, calls) if p]
    if obs_header:
        lines += [obs_header] + ([observation] if observation else [])
    return lines


def render_step(number: int, step: Step, max_tokens: int, count: TokenCounter) -> str:
    """One step within ``max_tokens``: header, message, tool calls, observation."""
    header, text, calls, obs_header, observation = _step_parts(number, step)
    measure = _measure(count)
    budget = max_tokens - measure(header) - (measure(obs_header) if obs_header else 0) - 4
    # Split what is left between message, calls and output; unused share flows on.
    shares = [(text, 0.35 if calls else 0.5), (calls, 0.25), (observation, 1.0)]
    remaining = max(budget, 0)
    rendered: list[str] = []
    for index, (part, share) in enumerate(shares):
        if not part:
            rendered.append("")
            continue
        later = sum(1 for p, _ in shares[index + 1:] if p)
        allowance = remaining if later == 0 else max(int(remaining * share), min(remaining, 8))
        piece = truncate_middle(part, allowance, count)
        rendered.append(piece)
        remaining -= measure(piece) + 1 if piece else 0
    text_r, calls_r, obs_r = rendered
    return _joined("\n", _step_lines(header, text_r, calls_r, obs_header, obs_r), count)


def _sampled(text: str) -> str:
    """What of ``text`` an offset cut tokenises: all of it, or its head and tail (``SAMPLE_CHARS`` each)."""
    return text if len(text) <= 2 * SAMPLE_CHARS else f"{text[:SAMPLE_CHARS]}\n{text[-SAMPLE_CHARS:]}"


def _uncut_text(steps: list[Step], final: str) -> str:
    """Every step uncut (huge parts as their head and tail), then the final output: what a candidate's
    parts are cut from, tokenised once."""
    blocks = ["\n".join(_step_lines(*(_sampled(p) for p in _step_parts(i + 1, step))))
              for i, step in enumerate(steps)]
    return "\n\n".join(blocks + ([f"{FINAL_HEADER}\n{_sampled(final)}"] if final else []))


def steps_marker(first: int, last: int) -> str:
    count = last - first + 1
    noun = "step" if count == 1 else "steps"
    span = f"step {first}" if count == 1 else f"steps {first}–{last}"
    return f"[... {count} {noun} elided ({span}) ...]"


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
        return _fit_exactly(final, budget_tokens, spans) if spans else truncate_middle(final, budget_tokens, count_tokens)

    last_agent_text = next((s.text.strip() for s in reversed(steps) if s.role == "agent"), "")
    shown_final = final if final and final != last_agent_text else ""
    if spans is None:
        return _steps_and_final(steps, shown_final, budget_tokens, count_tokens)
    with spans.primed(_uncut_text(steps, shown_final)):  # the candidate tokenised once; its parts cut off it
        return _steps_and_final(steps, shown_final, budget_tokens, spans)


def _steps_and_final(steps: list[Step], final: str, budget_tokens: int, count: TokenCounter) -> str:
    measure = _measure(count)
    final_section = ""
    if final:
        body = truncate_middle(final, int(budget_tokens * FINAL_OUTPUT_SHARE), count)
        final_section = _joined("\n", [FINAL_HEADER, body], count) if body else ""
    remaining = budget_tokens - (measure(final_section) + 1 if final_section else 0)
    spans = spans_of(count)
    result, limit = "", remaining
    for factor in (1.0, 0.9, 0.75, 0.6):  # a counter need not be additive over pieces
        if spans is None:
            limit = int(remaining * factor)
        text = _render_steps(steps, limit, count)
        result = f"{text}\n\n{final_section}" if final_section and text else (text or final_section)
        over = count(str(result)) - budget_tokens  # the exact count, even of a Counted text
        if over <= 0:
            return str(result)
        limit -= over  # offsets' counts are near the tokenizer's: take off what it found over
    return _fit_exactly(result, budget_tokens, spans) if spans else truncate_middle(result, budget_tokens, count)


def _render_steps(steps: list[Step], budget: int, count: TokenCounter) -> str:
    """Steps within ``budget``: all of them when they fit, else chosen by priority with markers."""
    n = len(steps)
    measure = _measure(count)
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
    measure = _measure(count)
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
        result = _fit_exactly(result, budget_tokens, spans) if spans else truncate_middle(result, budget_tokens, count_tokens)
    return result
