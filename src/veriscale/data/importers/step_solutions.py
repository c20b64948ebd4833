"""Step-by-step solutions with a first-error label (ProcessBench's shape), one per line.

    {"id": "gsm8k-69", "problem": "Jake buys 2 T-shirts ...", "steps": ["First, ...", "Then, ..."],
     "label": 1}

``label`` is the 0-based index of the first wrong step, -1 when every step is right. Each
record becomes a candidate whose trajectory has one agent step per solution step; the label is
kept in ``labels["first_error"]`` (never shown to a judge).

    detect(record) -> bool
    load(record, source="dev.jsonl:1") -> [Candidate]
"""

from __future__ import annotations

from typing import Any

from veriscale.data.model import Candidate, Step, Task, Trajectory
from veriscale.errors import UserError

NAME = "step-solutions"
DESCRIPTION = "step-by-step solutions JSONL (problem, steps, label = first wrong step or -1; ProcessBench)"
CRITERIA = "math"  # the criteria pack this format suggests (veriscale criteria show math)


def detect(obj: Any) -> bool:
    return (isinstance(obj, dict) and isinstance(obj.get("problem"), str) and isinstance(obj.get("steps"), list)
            and isinstance(obj.get("label"), int))


def load(obj: Any, source: str = "") -> list[Candidate]:
    """One candidate per solution."""
    if not detect(obj):
        raise UserError(f"{source or 'record'} is not a step-by-step solution (problem, steps, label): check its format")
    steps = [s for s in obj["steps"] if isinstance(s, str)]
    if len(steps) != len(obj["steps"]):
        raise UserError(f"{source or 'record'} has steps that are not text: each step must be a string")
    if not steps:
        raise UserError(f"{source or 'record'} has no steps: a step-by-step solution needs at least one step")
    label = obj["label"]
    if not -1 <= label < len(steps):
        raise UserError(f"{source or 'record'} has label {label} but {len(steps)} steps: use -1 or a step index")
    ident = str(obj.get("id") or source)
    return [Candidate(id=ident, text="\n\n".join(steps), source=source, task=Task(obj["problem"], id=ident),
                      trajectory=Trajectory([Step(role="agent", text=s) for s in steps]),
                      labels={"first_error": label})]
