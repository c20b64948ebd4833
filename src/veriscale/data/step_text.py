"""One trajectory step as verifier-prompt text, within a token budget.

    from veriscale.data.step_text import has_error_signal, render_step

    render_step(3, step, max_tokens=400, count=estimate_tokens)
    # "[step 3] agent\nI'll list the files.\n$ ls -la\n[output, exit code 0]\ntotal 8 ..."
    has_error_signal(step)     # True: non-zero exit code or "Traceback", "error", ... in its output

A step renders as its header, message, tool calls (``$ command`` for shell tools; a command the
message already shows is not repeated) and ``[output, exit code N]`` with the output; what is left
of the budget after the headers is shared between message, calls and output, each cut head+tail.
"""

from __future__ import annotations

import json

from veriscale.data.model import Step
from veriscale.data.truncate import TokenCounter, joined, measure_with, truncate_middle

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


def step_parts(number: int, step: Step) -> tuple[str, str, str, str, str]:
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


def step_lines(header: str, text: str, calls: str, obs_header: str, observation: str) -> list[str]:
    lines = [header] + [p for p in (text, calls) if p]
    if obs_header:
        lines += [obs_header] + ([observation] if observation else [])
    return lines


def render_step(number: int, step: Step, max_tokens: int, count: TokenCounter) -> str:
    """One step within ``max_tokens``: header, message, tool calls, observation."""
    header, text, calls, obs_header, observation = step_parts(number, step)
    measure = measure_with(count)
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
    return joined("\n", step_lines(header, text_r, calls_r, obs_header, obs_r), count)
