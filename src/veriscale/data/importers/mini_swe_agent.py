"""mini-swe-agent trajectories: chat messages where commands sit in ```bash blocks.

Two shapes are read::

    # the .traj.json mini-swe-agent writes
    {"trajectory_format": "mini-swe-agent-1", "info": {"submission": "diff ...", "exit_status": "Submitted"},
     "messages": [{"role": "system", ...}, {"role": "user", "content": "<task>"},
                  {"role": "assistant", "content": "THOUGHT: ...\\n```bash\\nls\\n```"},
                  {"role": "user", "content": "<returncode>0</returncode>\\n<output>...</output>"}]}
    # flattened result records (one per JSONL line)
    {"instance_id": "django__django-15037", "problem_statement": "...", "resolved": true,
     "steps": [{"role": "assistant", "content": ...}, {"role": "user", "content": ...}],
     "final_patch": "diff ..."}

    detect(record) -> bool
    load(record, source="trajs.jsonl:4") -> [Candidate]
"""

from __future__ import annotations

import re
from typing import Any

from veriscale.data.importers._chat import chat_to_conversation
from veriscale.data.importers._text import content_text, task_from_prompt
from veriscale.data.model import Candidate, Task, Trajectory
from veriscale.errors import UserError

NAME = "mini-swe-agent"
DESCRIPTION = "mini-swe-agent .traj.json or result records (messages/steps with ```bash blocks)"

_COMMAND_BLOCK = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n(.*?)\n?```", re.S)
_RUN_KEYS = ("instance_id", "final_patch", "problem_statement", "model_patch")


def _messages(obj: dict[str, Any]) -> list[Any] | None:
    for key in ("messages", "steps"):
        value = obj.get(key)
        if isinstance(value, list) and (not value or (isinstance(value[0], dict) and "role" in value[0])):
            return value
    return None


def detect(obj: Any) -> bool:
    """True for a mini-swe-agent trajectory or a result record with role/content steps."""
    if not isinstance(obj, dict):
        return False
    if str(obj.get("trajectory_format", "")).startswith("mini-swe-agent"):
        return True
    if _messages(obj) is None:
        return False
    info = obj.get("info")
    return any(k in obj for k in _RUN_KEYS) or (isinstance(info, dict) and "submission" in info)


def bash_blocks(text: str) -> list[dict[str, Any]]:
    """Tool calls for the ```bash blocks written in an assistant message."""
    return [
        {"name": "bash", "arguments": {"command": block.strip()}}
        for block in _COMMAND_BLOCK.findall(text)
        if block.strip()
    ]


def load(obj: Any, source: str = "") -> list[Candidate]:
    """One candidate: assistant turns are steps, following user turns are their output."""
    if not detect(obj):
        raise UserError(f"{source or 'record'} is not a mini-swe-agent trajectory: check its format")
    conv = chat_to_conversation(_messages(obj) or [], user_is_observation=True, parse_agent_text=bash_blocks)
    info = obj.get("info") if isinstance(obj.get("info"), dict) else {}
    patch = content_text(obj.get("final_patch") or obj.get("model_patch") or info.get("submission"))
    final_output = patch or conv.final_output
    instance_id = str(obj.get("instance_id") or "")
    problem = content_text(obj.get("problem_statement")) or conv.prompt
    task = None
    if problem or instance_id:
        task = Task(
            text=task_from_prompt(problem) if problem else f"SWE-bench instance {instance_id}",
            id=instance_id,
            metadata={"prompt": conv.prompt or problem, **({"system": conv.system} if conv.system else {})},
        )
    labels = {k: obj[k] for k in ("resolved", "reward", "score") if k in obj and obj[k] is not None}
    metadata: dict[str, Any] = {}
    for key in ("exit_status", "system", "model_name_or_path", "source_path"):
        if key in obj:
            metadata[key] = obj[key]
    for key in ("exit_status", "model_stats", "mini_version"):
        if key in info:
            metadata.setdefault(key, info[key])
    return [
        Candidate(
            id=str(obj.get("run_id") or instance_id or source),
            text=final_output,
            trajectory=Trajectory(steps=conv.steps, final_output=final_output),
            labels=labels,
            source=source,
            task=task,
            metadata=metadata,
        )
    ]
