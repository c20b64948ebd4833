"""SWE-bench predictions: ``{"instance_id", "model_patch", "model_name_or_path"}`` per line.

    {"instance_id": "astropy__astropy-12907", "model_name_or_path": "my-agent",
     "model_patch": "diff --git a/..."}

Also read as one JSON file: a list of such records, or the ``{instance_id: record}`` dict the
SWE-bench harness accepts. The patch is the candidate's text; the task is the instance (its
text is ``problem_statement`` when the record has it).

    detect(record) -> bool
    load(record, source="preds.jsonl:1") -> [Candidate]
"""

from __future__ import annotations

from typing import Any

from veriscale.data.importers._text import content_text
from veriscale.data.model import Candidate, Task, Trajectory
from veriscale.errors import UserError

NAME = "swebench-predictions"
DESCRIPTION = "SWE-bench predictions JSONL (instance_id, model_patch, model_name_or_path)"
CRITERIA = "swe"  # the criteria pack this format suggests (veriscale criteria show swe)


def _is_prediction(obj: Any) -> bool:
    return isinstance(obj, dict) and "instance_id" in obj and "model_patch" in obj


def detect(obj: Any) -> bool:
    """True for a prediction record, a list of them, or an ``{instance_id: prediction}`` dict."""
    if _is_prediction(obj):
        return True
    if isinstance(obj, list):
        return bool(obj) and all(_is_prediction(r) for r in obj[:5])
    if isinstance(obj, dict) and obj:
        values = list(obj.values())[:5]
        return all(isinstance(v, dict) and "model_patch" in v for v in values)
    return False


def _where(source: str, index: int, count: int) -> str:
    return source if count == 1 else f"{source}#{index + 1}"


def load(obj: Any, source: str = "") -> list[Candidate]:
    """One candidate per prediction."""
    if not detect(obj):
        raise UserError(f"{source or 'record'} is not a SWE-bench prediction: check its format")
    if _is_prediction(obj):
        records = [obj]
    elif isinstance(obj, list):
        records = obj
    else:
        records = [{"instance_id": key, **value} if isinstance(value, dict) else value for key, value in obj.items()]
    candidates = []
    for index, record in enumerate(records):
        where = _where(source, index, len(records))
        if not isinstance(record, dict) or "model_patch" not in record:
            raise UserError(f"{where} is not a SWE-bench prediction like the first ones (instance_id, model_patch): "
                            "give one prediction object per entry")
        candidates.append(_candidate(record, where))
    return candidates


def _candidate(record: dict[str, Any], source: str) -> Candidate:
    instance_id = str(record.get("instance_id") or "")
    if not instance_id:
        raise UserError(f"{source}: prediction has an empty instance_id: fill it in")
    patch = content_text(record.get("model_patch"))
    problem = content_text(record.get("problem_statement"))
    task = Task(
        text=problem or f"Resolve SWE-bench instance {instance_id}.",
        id=instance_id,
        metadata={"has_problem_statement": bool(problem)},
    )
    labels = {k: record[k] for k in ("resolved", "reward") if k in record}
    model = str(record.get("model_name_or_path") or "")
    return Candidate(
        id=model or source,
        text=patch,
        trajectory=Trajectory(steps=[], final_output=patch),
        labels=labels,
        source=source,
        task=task,
        metadata={"model_name_or_path": model} if model else {},
    )
