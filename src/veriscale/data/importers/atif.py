"""Harbor / Terminal-Bench trials and bare ATIF trajectories (Agent Trajectory Interchange Format).

A trial record (one per JSONL line, or one JSON file) looks like::

    {"trial_name": "fix-git__Ab3", "task_name": "fix-git", "reward": 1,
     "trajectory": {"schema_version": "ATIF-v1.2", "steps": [
         {"step_id": 1, "source": "user", "message": "Your task is ..."},
         {"step_id": 2, "source": "agent", "message": "Let me look.",
          "tool_calls": [{"tool_name": "bash", "arguments": {"keystrokes": "ls"}}],
          "observation": {"results": [{"content": "{\\"returncode\\": 0, \\"output\\": \\"...\\"}"}]}}]}}

``trajectory`` may also be a JSON string. A bare trajectory (``{"schema_version", "steps"}``)
is one candidate with no task name. Since ATIF-v1.6 a message or a result's content may be a list
of parts, an image as ``{"type": "image", "source": {"media_type": "image/png", "path": "shots/3.png"}}``
(a relative path is from the trajectory file's folder): a step's images go to ``Step.images``
(labelled "step 3 image 1"), the task prompt's to ``Task.images``.

    detect(record) -> bool
    load(record, source="trials.jsonl:3") -> [Candidate]
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from veriscale.data.images import ImageRef
from veriscale.data.importers._chat import as_list, normalize_tool_call
from veriscale.data.reader import load_json, try_json
from veriscale.data.importers._text import (
    combine_exit_codes,
    content_images,
    content_text,
    exit_code_value,
    parse_exit_code,
    task_from_prompt,
)
from veriscale.data.model import Candidate, Step, Task, Trajectory
from veriscale.errors import UserError

NAME = "atif"
DESCRIPTION = "Harbor/Terminal-Bench trial or ATIF trajectory JSON (steps with source/message)"

_LABEL_KEYS = ("reward", "resolved", "score", "success", "passed")
_METADATA_KEYS = ("trial_id", "task_checksum", "started_at", "ended_at", "duration_seconds",
                  "cost_cents", "n_input_tokens", "n_output_tokens")


def _is_atif_trajectory(obj: Any) -> bool:
    if isinstance(obj, str):
        head = obj[:400]
        return '"steps"' in head or '"schema_version"' in head
    if not isinstance(obj, dict) or not isinstance(obj.get("steps"), list):
        return False
    steps = obj["steps"]
    if steps:
        return isinstance(steps[0], dict) and "source" in steps[0]
    return str(obj.get("schema_version", "")).lower().startswith(("atif", "atif-"))


def detect(obj: Any) -> bool:
    """True for a trial record with an ATIF ``trajectory`` or for a bare ATIF trajectory."""
    if not isinstance(obj, dict):
        return False
    if "trajectory" in obj and not isinstance(obj["trajectory"], list):
        return _is_atif_trajectory(obj["trajectory"])
    return _is_atif_trajectory(obj)


def load(obj: Any, source: str = "") -> list[Candidate]:
    """One candidate per trial: steps, final agent message, reward labels and the task."""
    if not detect(obj):
        raise UserError(f"{source or 'record'} is not an ATIF trial or trajectory: check its format")
    trajectory_obj = obj["trajectory"] if "trajectory" in obj else obj
    if isinstance(trajectory_obj, str):
        trajectory_obj = load_json(trajectory_obj, f"{source or 'record'}: its 'trajectory' string")
        if not isinstance(trajectory_obj, dict) or not _is_atif_trajectory(trajectory_obj):
            raise UserError(f"{source or 'record'}: its 'trajectory' has no ATIF steps list: fix the export")

    system_parts: list[str] = []
    prompt = ""
    prompt_images: list[ImageRef] = []
    steps: list[Step] = []
    base = _base_folder(source)
    for number, raw in enumerate(as_list(trajectory_obj.get("steps")), start=1):
        if not isinstance(raw, dict):
            continue
        role = str(raw.get("source", "")).lower() or "agent"
        message = content_text(raw.get("message"))
        if not steps and role == "system":
            system_parts.append(message)
            continue
        if not steps and role == "user" and not prompt:
            prompt = message
            prompt_images = _labelled(content_images(raw.get("message"), base), "task")
            continue
        step = _step(role, message, raw)
        step.images = _labelled(_step_images(raw, base), f"step {raw.get('step_id') or number}")
        steps.append(step)

    final_output = next((s.text for s in reversed(steps) if s.role == "agent" and s.text.strip()), "")
    task_id = str(obj.get("task_name") or obj.get("task_id") or "")
    task = None
    if prompt or task_id:
        task = Task(
            text=task_from_prompt(prompt) if prompt else f"Task '{task_id}'",
            id=task_id,
            metadata={"prompt": prompt, **({"system": "\n\n".join(system_parts)} if system_parts else {})},
            images=prompt_images,
        )
    labels = {k: obj[k] for k in _LABEL_KEYS if k in obj and obj[k] is not None}
    verifier = obj.get("verifier_result")
    if isinstance(verifier, dict) and isinstance(verifier.get("rewards"), dict):
        for key, value in verifier["rewards"].items():
            labels.setdefault(key, value)
    metadata = {k: obj[k] for k in _METADATA_KEYS if k in obj}
    agent = trajectory_obj.get("agent")
    if isinstance(agent, dict):
        metadata["agent"] = {k: v for k, v in agent.items() if isinstance(v, (str, int, float))}
    candidate_id = str(
        obj.get("trial_name") or obj.get("trial_id") or trajectory_obj.get("session_id") or source
    )
    return [
        Candidate(
            id=candidate_id,
            text=final_output,
            trajectory=Trajectory(steps=steps, final_output=final_output),
            labels=labels,
            source=source,
            task=task,
            metadata=metadata,
        )
    ]


def _base_folder(source: str) -> Path | None:
    """The folder of the file a record came from (``runs/trials.jsonl:3`` -> ``runs``): where a
    relative image path starts."""
    if not source:
        return None
    return Path(re.sub(r":\d+$", "", source)).parent


def _step_images(raw: dict[str, Any], base: Path | None) -> list[ImageRef]:
    """The images of an ATIF step's message, then of its observation's results, in order."""
    images = content_images(raw.get("message"), base)
    observation = raw.get("observation")
    if isinstance(observation, dict):
        for result in as_list(observation.get("results")):
            if isinstance(result, dict):
                images.extend(content_images(result.get("content"), base))
    else:
        images.extend(content_images(observation, base))
    return images


def _labelled(images: list[ImageRef], where: str) -> list[ImageRef]:
    """``images`` named for where they were seen: "step 3 image 1", ..."""
    return [ImageRef(source=ref.source, label=f"{where} image {n}") for n, ref in enumerate(images, start=1)]


def _observation(raw: dict[str, Any]) -> tuple[str, int | None]:
    """Observation text and exit code of an ATIF step; JSON tool results are unpacked."""
    observation = raw.get("observation")
    if not isinstance(observation, dict):
        text = content_text(observation)
        return text, parse_exit_code(text)
    texts: list[str] = []
    codes: list[int | None] = []
    for result in as_list(observation.get("results")):
        content = result.get("content") if isinstance(result, dict) else result
        text, code = _tool_result(content_text(content))
        texts.append(text)
        codes.append(code)
    return "\n".join(t for t in texts if t), combine_exit_codes(codes)


def _tool_result(content: str) -> tuple[str, int | None]:
    """Unpack ``{"returncode", "output"}`` (or ``output_head``/``output_tail``) tool JSON."""
    if content.lstrip().startswith("{"):
        data = try_json(content)
        if isinstance(data, dict) and ("output" in data or "output_head" in data):
            if "output" in data:
                text = content_text(data.get("output"))
            else:
                elided = data.get("elided_chars")
                marker = f"[... {elided} characters elided by the agent harness ...]" if elided else "[...]"
                text = f"{content_text(data.get('output_head'))}\n{marker}\n{content_text(data.get('output_tail'))}"
            if data.get("exception_info"):
                text = f"{text}\n[exception] {content_text(data['exception_info'])}".strip()
            return text, exit_code_value(data.get("returncode", data.get("exit_code")))
    return content, parse_exit_code(content)


#: The per-step metrics an ATIF step may carry (``metrics``), kept for the trajectory viewer.
_STEP_METRICS = ("prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd")


def _step(role: str, message: str, raw: dict[str, Any]) -> Step:
    calls = [normalize_tool_call(c) for c in as_list(raw.get("tool_calls"))]
    observation, exit_code = _observation(raw)
    return Step(
        role="agent" if role in ("agent", "assistant") else role,
        text=message,
        tool_calls=calls,
        observation=observation,
        exit_code=exit_code,
        tool_results=_results_by_call(raw),
        metrics=_step_metrics(raw),
    )


def _results_by_call(raw: dict[str, Any]) -> dict[str, str]:
    """Each observation result under the id of the call it answers (``source_call_id``)."""
    observation = raw.get("observation")
    out: dict[str, str] = {}
    for result in as_list(observation.get("results")) if isinstance(observation, dict) else []:
        if isinstance(result, dict) and result.get("source_call_id"):
            text, _ = _tool_result(content_text(result.get("content")))
            key = str(result["source_call_id"])
            out[key] = f"{out[key]}\n{text}" if key in out else text
    return out


def _step_metrics(raw: dict[str, Any]) -> dict[str, Any]:
    """The step's timestamp and token counts (numbers only), where the trajectory has them."""
    metrics = raw.get("metrics") if isinstance(raw.get("metrics"), dict) else {}
    out: dict[str, Any] = {k: metrics[k] for k in _STEP_METRICS
                           if isinstance(metrics.get(k), (int, float)) and not isinstance(metrics.get(k), bool)}
    if isinstance(raw.get("timestamp"), str):
        out["timestamp"] = raw["timestamp"]
    return out
