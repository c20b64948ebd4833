"""Frames as a candidate: a folder of images (screenshots, camera frames) or a video file.

    run-1/                      # one candidate whose images are the folder's, in order
      task.md                   #   optional: the task
      frame1.png frame2.png … frame10.png
    clip.mp4                    # one candidate: the video's frames (the ``frames`` setting)
    run-2/  task.md  screen.mp4 # a rollout folder holding one video: the same, with its task

    detect(Path("run-1")) -> True
    load(Path("run-1")) -> [Candidate(id="run-1", text="10 frames: frame1.png … frame10.png", images=[...])]

Images are ordered by the time in their names when every name carries one (``2024-05-01T10-00-05``,
a Unix time in seconds or milliseconds, or seconds such as ``1.5s``), else by name in natural order
(``frame2`` before ``frame10``). The candidate's text says what it shows, so a text-only verifier
still reads something. A folder of rollout subfolders, each of frames, is read by ``folder.py``,
which asks :func:`is_frames_folder` of each subfolder.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from veriscale.data.images import IMAGE_SUFFIXES, ImageRef
from veriscale.data.importers._files import check_regular, logical_suffix
from veriscale.data.importers._rollout import TASK_FILE_NAMES, merge_result, task_file, visible
from veriscale.data.model import Candidate, Task
from veriscale.data.reader import BadInput
from veriscale.data.video import VIDEO_SUFFIXES, video_frames

NAME = "frames"
DESCRIPTION = "images or a video as one candidate (a folder of frames, or .mp4/.webm/.mkv/.mov/.avi)"

_IGNORED = {n.lower() for n in TASK_FILE_NAMES} | {"result.json"}
_ISO = re.compile(r"(?<!\d)(\d{4})-?(\d{2})-?(\d{2})[T_ -]?(\d{2})[:_.-]?(\d{2})[:_.-]?(\d{2})(?:[.,](\d{1,6}))?(?!\d)")
_EPOCH = re.compile(r"(?<!\d)(1\d{9})(\d{3})?(?!\d)")
_SECONDS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)s(?![a-z])", re.I)
_DIGITS = re.compile(r"(\d+)")


def _media(folder: Path) -> tuple[list[Path], list[Path], list[Path], list[Path]]:
    """The folder's visible entries: images, videos, other files (task and result files aside), subfolders."""
    images: list[Path] = []
    videos: list[Path] = []
    others: list[Path] = []
    subfolders: list[Path] = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if not visible(entry):
            continue
        if entry.is_dir():
            subfolders.append(entry)
        elif entry.name.lower() in _IGNORED:
            continue
        elif entry.suffix.lower() in IMAGE_SUFFIXES:
            images.append(entry)
        elif logical_suffix(entry) in VIDEO_SUFFIXES:
            videos.append(entry)
        else:
            others.append(entry)
    return images, videos, others, subfolders


def is_frames_folder(folder: Path) -> bool:
    """Whether ``folder`` is one rollout of frames: no subfolders, and besides a task file (and a
    Harbor ``result.json``) only images, or exactly one video."""
    images, videos, others, subfolders = _media(folder)
    if subfolders or others:
        return False
    return bool(images) and not videos or len(videos) == 1 and not images


def detect(obj: Any) -> bool:
    """True for a video file (by its suffix) or a folder of frames (:func:`is_frames_folder`)."""
    if not isinstance(obj, Path):
        return False
    if obj.is_dir():
        return is_frames_folder(obj)
    return obj.is_file() and logical_suffix(obj) in VIDEO_SUFFIXES


def natural_key(name: str) -> tuple[Any, ...]:
    """Sorts ``frame2`` before ``frame10``: digit runs compare as numbers, the rest ignoring case."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part.lower())
                 for part in _DIGITS.split(name) if part)


def name_time(name: str) -> tuple[str, float] | None:
    """The time a file name carries, as (kind, seconds): an ISO-like date and time, a Unix time
    (seconds or milliseconds) or seconds written ``1.5s``; None when it carries none."""
    stem = name.rsplit(".", 1)[0] if "." in name else name
    match = _ISO.search(stem)
    if match:
        year, month, day, hour, minute, second, fraction = match.groups()
        try:
            when = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                            tzinfo=timezone.utc)
        except ValueError:
            return None
        return "iso", when.timestamp() + (float(f"0.{fraction}") if fraction else 0.0)
    match = _EPOCH.search(stem)
    if match:
        return "epoch", int(match[1]) + (int(match[2]) / 1000 if match[2] else 0.0)
    match = _SECONDS.search(stem)
    if match:
        return "seconds", float(match[1])
    return None


def ordered_frames(images: list[Path]) -> tuple[list[ImageRef], str]:
    """``images`` as refs in order, and how they were ordered ("time in name" or "name"); by time,
    each ref's ``at_s`` is its time after the first's."""
    times = [name_time(p.name) for p in images]
    kinds = {t[0] for t in times if t is not None}
    if images and all(t is not None for t in times) and len(kinds) == 1:
        pairs = sorted(zip(images, [t[1] for t in times if t is not None]),
                       key=lambda pair: (pair[1], natural_key(pair[0].name)))
        first = pairs[0][1]
        return [ImageRef(source=str(p), label=p.name, at_s=round(t - first, 3)) for p, t in pairs], "time in name"
    return [ImageRef(source=str(p), label=p.name) for p in sorted(images, key=lambda p: natural_key(p.name))], "name"


def _summary(refs: list[ImageRef]) -> str:
    if len(refs) == 1:
        return f"1 frame: {refs[0].label}"
    return f"{len(refs)} frames: {refs[0].label} … {refs[-1].label}"


def video_candidate(path: Path, candidate_id: str = "", task: Task | None = None, source: str = "") -> Candidate:
    """The video at ``path`` as one candidate: its frames (the ``frames`` setting) and what they are."""
    clip = video_frames(path)
    text = f"video {path.name} ({clip.duration_s:.2f} s): {_summary(clip.frames)}"
    return Candidate(id=candidate_id or path.name.rsplit(".", 1)[0] or path.name, text=text, images=clip.frames,
                     source=source or str(path), task=task, metadata={"video": clip.metadata()})


def load(obj: Any, source: str = "") -> list[Candidate]:
    """One candidate: the video file, or the folder's images (or its one video) with its task file."""
    path = Path(obj)
    if not path.is_dir():
        check_regular(path)
        if logical_suffix(path) not in VIDEO_SUFFIXES:
            raise BadInput(f"'{path}' is not a video ({', '.join(VIDEO_SUFFIXES)}): give a video file or a "
                           "folder of images")
        return [video_candidate(path, source=source)]
    images, videos, _, _ = _media(path)
    task = task_file(path)
    if not images and len(videos) == 1:
        candidate = video_candidate(videos[0], path.name, task, source or str(path))
    elif not images:
        what = "holds more than one video" if videos else "holds no images"
        raise BadInput(f"folder '{path}' {what}: give a folder of images ({', '.join(IMAGE_SUFFIXES)}) or of "
                       "one video per candidate")
    else:
        refs, order = ordered_frames(images)
        candidate = Candidate(id=path.name, text=_summary(refs), images=refs, source=source or str(path),
                              task=task, metadata={"frames_order": order})
    candidate.artifacts = {p.name: str(p) for p in [*images, *videos]}
    merge_result(path, candidate)
    return [candidate]
