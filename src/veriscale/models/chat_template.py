"""Client-side chat templates, so a score slot can be prefilled inside the assistant turn.

    render_chat("chatml", [Message("user", "hi")], prefill="Grade:")
    # '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\nGrade:'
"""

from __future__ import annotations

from typing import Callable, Sequence

from veriscale.errors import UserError
from veriscale.models.base import Message


def _chatml(messages: Sequence[Message], prefill: str) -> str:
    out = [f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages]
    return "".join(out) + "<|im_start|>assistant\n" + prefill


def _llama3(messages: Sequence[Message], prefill: str) -> str:
    out = ["<|begin_of_text|>"]
    for m in messages:
        out.append(f"<|start_header_id|>{m.role}<|end_header_id|>\n\n{m.content}<|eot_id|>")
    return "".join(out) + "<|start_header_id|>assistant<|end_header_id|>\n\n" + prefill


def _gemma(messages: Sequence[Message], prefill: str) -> str:
    out, system = [], ""
    for m in messages:
        if m.role == "system":
            system = m.content + "\n\n"
            continue
        role = "model" if m.role == "assistant" else "user"
        out.append(f"<start_of_turn>{role}\n{system}{m.content}<end_of_turn>\n")
        system = ""
    return "".join(out) + "<start_of_turn>model\n" + prefill


TEMPLATES: dict[str, Callable[[Sequence[Message], str], str]] = {
    "chatml": _chatml,  # SmolLM2, Qwen 2/2.5/3, many others
    "llama3": _llama3,
    "gemma": _gemma,
}


def render_chat(template: str | None, messages: Sequence[Message], prefill: str = "") -> str:
    """The prompt text with the assistant turn opened and ``prefill`` written into it. ``template`` is a
    backend's (None where it names none: refused as an unknown one, as any name not in ``TEMPLATES``)."""
    fn = TEMPLATES.get(template) if template is not None else None
    if fn is None:
        raise UserError(f"unknown chat template '{template}': use one of {', '.join(TEMPLATES)}")
    return fn(messages, prefill)


_MARKERS = {"<|im_start|>": "chatml", "<|start_header_id|>": "llama3", "<start_of_turn>": "gemma"}


def detect_template(jinja_template: str) -> str | None:
    """Which of our templates a model's own (Jinja) chat template corresponds to, if any."""
    for marker, name in _MARKERS.items():
        if marker in (jinja_template or ""):
            return name
    return None
