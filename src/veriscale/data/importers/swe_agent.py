"""Classic SWE-agent ``.traj`` files: ``{"trajectory": [{action, observation, thought}], "info"}``.

    {"trajectory": [{"thought": "Let me look.", "action": "ls", "observation": "setup.py"}],
     "history": [{"role": "user", "content": "<issue text>"}],
     "info": {"exit_status": "submitted", "submission": "diff --git ..."}}

The submission (the patch) is the final output; the problem statement comes from
``replay_config`` or the first non-demo user message of ``history``.

    detect(record) -> bool
    load(record, source="run.traj") -> [Candidate]
"""

from __future__ import annotations

from typing import Any

from veriscale.data.importers._chat import as_list
from veriscale.data.reader import try_json
from veriscale.data.importers._text import content_text, parse_exit_code, task_from_prompt
from veriscale.data.model import Candidate, Step, Task, Trajectory
from veriscale.errors import UserError

NAME = "swe-agent"
DESCRIPTION = "SWE-agent .traj JSON (trajectory: [{action, observation, thought}], info)"

_LABEL_KEYS = ("resolved", "reward", "score")


def detect(obj: Any) -> bool:
    """True for a dict whose ``trajectory`` is a list of ``{action, observation}`` entries."""
    if not isinstance(obj, dict) or not isinstance(obj.get("trajectory"), list):
        return False
    entries = obj["trajectory"]
    if not entries:
        return isinstance(obj.get("info"), dict)
    first = entries[0]
    return isinstance(first, dict) and ("action" in first or "observation" in first)


def load(obj: Any, source: str = "") -> list[Candidate]:
    """One candidate: each trajectory entry is one agent step; the submission is the output."""
    if not detect(obj):
        raise UserError(f"{source or 'record'} is not a SWE-agent .traj: check its format")
    info = obj.get("info") if isinstance(obj.get("info"), dict) else {}
    steps = []
    for entry in obj["trajectory"]:
        if not isinstance(entry, dict):
            continue
        observation = content_text(entry.get("observation"))
        action = content_text(entry.get("action")).strip()
        thought = content_text(entry.get("thought") or entry.get("response"))
        steps.append(
            Step(
                role="agent",
                text=thought,
                tool_calls=[{"name": "bash", "arguments": {"command": action}}] if action else [],
                observation=observation,
                exit_code=parse_exit_code(observation),
            )
        )
    submission = content_text(info.get("submission"))
    final_output = submission or next((s.text for s in reversed(steps) if s.text.strip()), "")
    problem, instance_id = _problem_statement(obj)
    task = Task(text=task_from_prompt(problem), id=instance_id, metadata={"prompt": problem}) if problem else None
    labels = {k: obj[k] for k in _LABEL_KEYS if k in obj}
    labels.update({k: info[k] for k in _LABEL_KEYS if k in info and k not in labels})
    metadata = {k: info[k] for k in ("exit_status", "model_stats") if k in info}
    return [
        Candidate(
            id=str(obj.get("instance_id") or instance_id or source),
            text=final_output,
            trajectory=Trajectory(steps=steps, final_output=final_output),
            labels=labels,
            source=source,
            task=task,
            metadata=metadata,
        )
    ]


def _problem_statement(obj: dict[str, Any]) -> tuple[str, str]:
    """(problem text, instance id) from the places SWE-agent versions keep them."""
    instance_id = str(obj.get("instance_id") or "")
    if isinstance(obj.get("problem_statement"), str):
        return obj["problem_statement"], instance_id
    config = obj.get("replay_config")
    if isinstance(config, str):
        config = try_json(config)
    if isinstance(config, dict):
        problem = config.get("problem_statement")
        if isinstance(problem, dict) and isinstance(problem.get("text"), str):
            return problem["text"], instance_id or str(problem.get("id") or "")
    for message in as_list(obj.get("history")):
        if isinstance(message, dict) and message.get("role") == "user" and not message.get("is_demo"):
            return content_text(message.get("content")), instance_id
    return "", instance_id
