"""The harness session prompts, kept as Markdown templates in ``harness/prompts/<name>.md``.

A template is the prompt text with ``$name`` placeholders (:class:`string.Template`), so its
JSON examples need no brace escaping; the protocol only fills them in. Values are inserted as
they are (never read again as a template), and untrusted values go in as fenced data blocks::

    render("resolve-task", task=fence("TASK", task_text))
    # 'The task, a data block:\\n<<<TASK 9a...>>>\\n...\\n<<<END TASK 9a...>>>\\nResolve the disputed claims ...'

Every placeholder must be given: a missing one is a ``KeyError`` (a bug in the caller).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template

from veriscale.errors import UserError

PROMPT_NAMES = (
    "common", "resolve", "resolve-task", "challenge", "challenge-task", "adjudicate", "adjudicate-task",
    "deliver", "contract-artifact", "contract-pick-only",
)


@cache
def prompt_template(name: str) -> Template:
    """The template ``prompts/<name>.md`` of the installed package."""
    if name not in PROMPT_NAMES:
        raise ValueError(f"unknown harness prompt {name!r}: one of {', '.join(PROMPT_NAMES)}")
    try:
        text = resources.files("veriscale.harness").joinpath(f"prompts/{name}.md").read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"the harness prompt file prompts/{name}.md cannot be read ({exc}): "
                        "reinstall veriscale so that its package data is present") from None
    return Template(text)


def render(name: str, **values: object) -> str:
    """The prompt ``name`` with every placeholder filled from ``values``."""
    return prompt_template(name).substitute({key: str(value) for key, value in values.items()})
