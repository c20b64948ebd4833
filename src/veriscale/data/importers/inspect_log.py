"""Inspect AI eval logs: the JSON log (``inspect eval --log-format json``) or the ``.eval`` zip.

    {"eval": {"task": "ctf", "model": "openai/gpt-4o"},
     "samples": [{"id": 7, "epoch": 1, "input": "Find the flag.", "target": "flag{x}",
                  "messages": [...chat messages...], "scores": {"includes": {"value": "C"}}}]}

Each sample (one epoch of one dataset item) is one candidate; its task id is
``<eval task>/<sample id>`` so epochs of the same item group together. Scores go to labels as
given, plus ``score`` as a number (C=1, I=0, P=0.5, N=0) when there is a single scorer.
Images in messages (``{"type": "image", "image": "<data URL or path>"}``, Inspect's ContentImage;
an ``attachment://`` reference is looked up in the sample's ``attachments``) go to the step that
saw them (``Step.images``: a tool's screenshot to the step that called the tool), the input's to
``Task.images``.

    detect(record_or_path) -> bool
    load(record_or_path, source="logs/ctf.json") -> [Candidate]
"""

from __future__ import annotations

import re
import zipfile
import zlib
from functools import partial
from pathlib import Path
from typing import Any

from veriscale.data.importers._chat import as_list, chat_to_conversation
from veriscale.data.importers._files import MAX_BYTES
from veriscale.data.reader import load_json, shown
from veriscale.data.images import ImageRef
from veriscale.data.importers._text import content_images, content_text, task_from_prompt
from veriscale.data.model import Candidate, Step, Task, Trajectory
from veriscale.errors import UserError
from veriscale.harness.workspace.zip_limits import Inflation, ZipLimits, read_member

NAME = "inspect-log"
DESCRIPTION = "Inspect AI eval log (.json with eval + samples, or .eval zip)"

_LETTER_VALUES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}


def detect(obj: Any) -> bool:
    """True for a JSON log (``eval.task`` plus ``samples``) or a ``.eval`` zip archive path."""
    if isinstance(obj, Path):
        return obj.suffix.lower() == ".eval" and zipfile.is_zipfile(obj)
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("eval"), dict)
        and "task" in obj["eval"]
        and ("samples" in obj or "results" in obj or "status" in obj)
    )


def load(obj: Any, source: str = "") -> list[Candidate]:
    """One candidate per sample of the log."""
    if isinstance(obj, Path):
        source = source or str(obj)
        obj = _read_eval_zip(obj)
    if not detect(obj):
        raise UserError(f"{source or 'record'} is not an Inspect eval log: check its format")
    samples = obj.get("samples") or []
    if not samples:
        raise UserError(
            f"Inspect log {source or ''} holds no samples: rerun the eval with samples logged"
        )
    bad = next((i for i, sample in enumerate(samples) if not isinstance(sample, dict)), None) \
        if isinstance(samples, list) else -1
    if bad is not None:
        where = "its samples are not a list" if bad < 0 else f"sample {bad + 1} is a {type(samples[bad]).__name__}"
        raise UserError(f"Inspect log {source or ''} is malformed ({where}, not an object): re-export the log")
    eval_info = obj["eval"]
    task_name = str(eval_info.get("task") or "")
    model = str(eval_info.get("model") or "")
    return [_candidate(sample, task_name, model, f"{source}#sample{i + 1}") for i, sample in enumerate(samples)]


def _read_eval_zip(path: Path) -> dict[str, Any]:
    """A ``.eval`` archive as the JSON-log shape: header.json's ``eval`` plus samples/*.json."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if sum(info.file_size for info in archive.infolist()) > MAX_BYTES:
                raise UserError(f"'{path}' unpacks to more than {MAX_BYTES >> 20} MiB: export fewer samples per log")
            # the declared sizes may lie: every member is also counted as it inflates
            inflation = Inflation(f"'{path}'", ZipLimits.from_env())
            inflation.check_count(archive)
            header_name = next((n for n in ("header.json", "_journal/start.json") if n in names), None)
            if header_name is None:
                raise UserError(f"'{path}' has no header.json: is it an Inspect .eval log?")
            header = _member(archive, header_name, path, inflation)
            sample_names = sorted(n for n in names if n.startswith("samples/") and n.endswith(".json"))
            samples = [_member(archive, n, path, inflation) for n in sample_names]
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError, KeyError,
            ValueError) as exc:  # a damaged, encrypted or oddly compressed archive
        raise UserError(f"'{path}' is not a readable Inspect .eval log ({shown(exc)}): re-export it") from None
    if not isinstance(header, dict) or not isinstance(header.get("eval", {}), dict):
        raise UserError(f"'{path}' has a header.json without an 'eval' object: is it an Inspect .eval log?")
    return {"eval": header.get("eval", {}), "samples": samples}


def _member(archive: zipfile.ZipFile, name: str, path: Path, inflation: Inflation) -> Any:
    """One JSON member of a ``.eval`` archive, within the size and JSON caps."""
    try:
        text = read_member(archive, name, inflation).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"'{path}' member {shown(name)} is not UTF-8 JSON: re-export the log") from None
    return load_json(text, f"'{path}' member {shown(name)}")


def _candidate(sample: dict[str, Any], task_name: str, model: str, source: str) -> Candidate:
    sample_id = str(sample.get("id", ""))
    epoch = sample.get("epoch", 1)
    images = partial(_images, sample, _base_folder(source))
    conv = chat_to_conversation(as_list(sample.get("messages")), images=images)
    _label_step_images(conv.steps)
    output = sample.get("output") if isinstance(sample.get("output"), dict) else {}
    completion = content_text(output.get("completion"))
    choices = as_list(output.get("choices"))
    if not completion and choices:
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        completion = content_text(message.get("content")) if isinstance(message, dict) else ""
    final_output = completion or conv.final_output
    raw_input = sample.get("input")
    asked = None if isinstance(raw_input, str) else chat_to_conversation(as_list(raw_input), images=images)
    prompt = content_text(raw_input) if asked is None else asked.prompt
    prompt = prompt or conv.prompt
    task_images = (asked.prompt_images if asked is not None else []) or conv.prompt_images
    task = Task(
        text=task_from_prompt(prompt) if prompt else f"{task_name} sample {sample_id}",
        id=f"{task_name}/{sample_id}" if task_name else sample_id,
        metadata={"prompt": prompt, "target": sample.get("target"), **({"system": conv.system} if conv.system else {})},
        images=[ImageRef(source=ref.source, label=f"task image {n}") for n, ref in enumerate(task_images, start=1)],
    )
    return Candidate(
        id=f"{model or 'run'}/epoch-{epoch}",
        text=final_output,
        trajectory=Trajectory(steps=conv.steps, final_output=final_output),
        labels=_labels(sample),
        source=source,
        task=task,
        metadata={"model": model, "epoch": epoch, "sample_id": sample_id},
    )


def _base_folder(source: str) -> Path | None:
    """The folder of the log a sample came from (``logs/ctf.json#sample2`` -> ``logs``)."""
    path = re.sub(r"#sample\d+$", "", source)
    return Path(path).parent if path else None


def _images(sample: dict[str, Any], base: Path | None, content: Any) -> list[ImageRef]:
    """The images of one message ``content`` of ``sample``, its ``attachment://`` references looked up."""
    attachments = sample.get("attachments") if isinstance(sample.get("attachments"), dict) else {}

    def resolve(where: str) -> str:
        if where.startswith("attachment://"):
            found = attachments.get(where[len("attachment://"):])
            return found if isinstance(found, str) else ""
        return where

    return content_images(content, base, resolve)


def _label_step_images(steps: list[Step]) -> None:
    """Each step's images named for where they were seen: "step 3 image 1", ..."""
    for number, step in enumerate(steps, start=1):
        step.images = [ImageRef(source=ref.source, label=f"step {number} image {k}")
                       for k, ref in enumerate(step.images, start=1)]


def _labels(sample: dict[str, Any]) -> dict[str, Any]:
    scores = sample.get("scores")
    if not isinstance(scores, dict):
        scores = {"score": sample["score"]} if isinstance(sample.get("score"), dict) else {}
    labels: dict[str, Any] = {}
    for name, score in scores.items():
        labels[name] = score.get("value") if isinstance(score, dict) else score
    if len(labels) == 1:
        (value,) = labels.values()
        numeric = _LETTER_VALUES.get(value) if isinstance(value, str) else value
        if isinstance(numeric, (int, float)) and not isinstance(numeric, bool):
            labels["score"] = numeric
        elif isinstance(value, bool):
            labels["score"] = float(value)
    return labels
