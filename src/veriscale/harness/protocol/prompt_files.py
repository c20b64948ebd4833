"""The harness session prompts, kept as Markdown templates in ``harness/protocol/prompts/<name>.md``.

A template is the prompt text with ``$name`` placeholders (:class:`string.Template`), so its
JSON examples need no brace escaping; the protocol only fills them in. Values are inserted as
they are (never read again as a template), and untrusted values go in as fenced data blocks::

    render("resolve-task", task=fence("TASK", task_text))
    # 'The task, a data block:\\n<<<TASK 9a...>>>\\n...\\n<<<END TASK 9a...>>>\\nResolve the disputed claims ...'

Every placeholder must be given: a missing one is a ``KeyError`` (a bug in the caller).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from veriscale.errors import UserError
from veriscale.harness.skills.library import load_skills, skill_index

AGENDA_ITEMS_IN_PROMPT = 15
CONSENSUS_ITEMS_IN_PROMPT = 25

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
        text = resources.files("veriscale.harness.protocol").joinpath(f"prompts/{name}.md").read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"the harness prompt file prompts/{name}.md cannot be read ({exc}): "
                        "reinstall veriscale so that its package data is present") from None
    return Template(text)


def render(name: str, **values: object) -> str:
    """The prompt ``name`` with every placeholder filled from ``values``."""
    return prompt_template(name).substitute({key: str(value) for key, value in values.items()})


# --- the texts the protocol puts into prompts --------------------------------------------------


def agenda_text(agenda: dict[str, Any], limit: int) -> str:
    items = agenda.get("items", [])
    if not items:
        return "(no disputed claims were found by the claim map; compare the deliverables yourself)"
    lines = []
    for item in items[:limit]:
        candidates = "; ".join(f"{c['display']} (rollouts {', '.join(c['rollouts'])})" for c in item["candidates"])
        missing = f"; missing from {', '.join(item['missing_from'])}" if item["missing_from"] else ""
        lines.append(f"{item['rank']}. {item['key']}: {candidates}{missing}. Check: {item['check']}")
    if len(items) > limit:
        lines.append(f"... {len(items) - limit} more in agenda.json")
    return "\n".join(lines)


def consensus_text(claims: dict[str, Any], limit: int) -> str:
    chosen = [c for c in claims.get("claims", []) if c["status"] in ("consensus", "omitted")]
    if not chosen:
        return "(the claim map found no shared claims; read the deliverables yourself)"
    lines = []
    for claim in chosen[:limit]:
        value = claim["candidates"][0]["display"] if claim["candidates"] else "?"
        extra = f" (missing from {', '.join(claim['missing_from'])})" if claim["missing_from"] else ""
        lines.append(f"- {claim['key']} = {value}{extra}")
    if len(chosen) > limit:
        lines.append(f"... {len(chosen) - limit} more in claims.json")
    return "\n".join(lines)


# --- skills -----------------------------------------------------------------------------------

def load_phase_skills(phase: str, dirs: Sequence[Path]) -> str:
    """The index of the skills a phase gets (name, description, SKILL.md path, scripts): the
    built-in library plus the user's folders, a user skill replacing a built-in of the same
    name. Sessions read a skill's SKILL.md when they need it, so prompts stay short."""
    index = skill_index(load_skills(phase, list(dirs)))
    if not index:
        return ""
    return ("\nSkills (methods, never answers; read a skill's SKILL.md before using it):\n" + index)
