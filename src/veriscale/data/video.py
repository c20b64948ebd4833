"""A video as the frames a verdict sees: decoded with PyAV, picked by the ``frames`` setting.

The ``frames`` setting says which frames: ``"N"`` (N evenly spaced over the duration, the middle
of each of N equal parts, 1 to 256), ``"every:S"`` (one each S seconds from the start, at most
256) or ``"keys"`` (the container's key frames, at most 64; a video with fewer than two falls back
to 8 evenly spaced, and a note says so). Each frame picked is the one whose timestamp is nearest
its target time, stored as PNG bytes, shrunk first to the ``image_max_side`` setting (what
:func:`veriscale.data.images.load_image` would send anyway). Decoding, seeking to the key frame
before each frame picked, is :mod:`veriscale.data.video_decode`'s::

    clip = video_frames("runs/run-1/screen.mp4")           # the frames setting: 8 by default
    clip = video_frames("screen.mp4", "every:0.5")
    clip.frames[2]        # ImageRef(source='screen.mp4', label='frame 3 at 1.25 s', at_s=1.25, data=b'\\x89PNG…')
    clip.notes            # ['the video has only 5 frames, fewer than the 8 asked: all 5 are given']
    parse_frames("keys")  # FrameChoice(kind='keys', ...)

Nothing is returned short silently: whenever fewer frames come back than were asked for, a note
says why.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriscale import settings
from veriscale.data.images import ImageRef, ImageSettings
from veriscale.data.reader import BadInput, check_regular, max_input_bytes
from veriscale.data.video_decode import FIX, DecodeStats, Timing, decode_frames, nearest, read_timing
from veriscale.errors import setting, worded

VIDEO_SUFFIXES = (".mp4", ".webm", ".mkv", ".mov", ".avi")
MAX_FRAMES = 256  # "N" and "every:S"
MAX_KEY_FRAMES = 64  # "keys"
KEYS_FALLBACK = 8  # evenly spaced frames when a video has fewer than two key frames
_EVERY = re.compile(r"every\s*:\s*(\S+)")


@dataclass(frozen=True)
class FrameChoice:
    """A parsed ``frames`` setting: ``kind`` is "count" (``count`` frames), "every" (one each
    ``every_s`` seconds) or "keys"; ``text`` is the setting as given."""

    kind: str
    text: str
    count: int = 0
    every_s: float = 0.0


@dataclass
class VideoFrames:
    """The frames picked from one video, what was asked (``choice``) and notes on any shortfall."""

    frames: list[ImageRef]
    duration_s: float
    choice: str
    notes: list[str] = field(default_factory=list)
    source: str = ""

    def metadata(self) -> dict[str, Any]:
        """What a candidate records of its video: ``{"source", "duration_s", "frames", "notes"}``."""
        return {"source": self.source, "duration_s": round(self.duration_s, 3), "frames": self.choice,
                "notes": list(self.notes)}


def _bad_choice(text: str) -> BadInput:
    return BadInput(f"{setting('frames')} is {text.strip()[:40]!r}, not a frame choice: give N (1 to {MAX_FRAMES} "
                    "evenly spaced frames), every:S (one frame each S seconds) or keys (the key frames)")


def parse_frames(text: str) -> FrameChoice:
    """The ``frames`` setting's text as a :class:`FrameChoice`; anything else is one sentence."""
    given = str(text).strip().lower()
    if re.fullmatch(r"[0-9]{1,4}", given):
        count = int(given)
        if not 1 <= count <= MAX_FRAMES:
            raise _bad_choice(str(text))
        return FrameChoice("count", str(count), count=count)
    if given == "keys":
        return FrameChoice("keys", given)
    match = _EVERY.fullmatch(given)
    if match:
        try:
            every = float(match[1])
        except ValueError:
            raise _bad_choice(str(text)) from None
        if math.isfinite(every) and every > 0:
            return FrameChoice("every", f"every:{match[1]}", every_s=every)
    raise _bad_choice(str(text))


def _evenly(count: int, duration: float) -> list[float]:
    return [duration * (i + 0.5) / count for i in range(count)]


def _targets(choice: FrameChoice, timing: Timing, notes: list[str]) -> list[float]:
    """The times (from the start) to take frames at; ``notes`` says where the video gives fewer."""
    if choice.kind == "keys":
        keys = timing.keys
        if len(keys) < 2:
            notes.append(f"the video has {len(keys)} key frame{'' if len(keys) == 1 else 's'}, fewer than 2: "
                         f"{KEYS_FALLBACK} evenly spaced frames are given instead")
            return _count_targets(KEYS_FALLBACK, timing, notes)
        if len(keys) > MAX_KEY_FRAMES:
            notes.append(f"the video has {len(keys)} key frames, over the cap of {MAX_KEY_FRAMES}: "
                         f"{MAX_KEY_FRAMES} of them, evenly spread, are given")
            keys = [keys[round(i * (len(keys) - 1) / (MAX_KEY_FRAMES - 1))] for i in range(MAX_KEY_FRAMES)]
        return list(keys)
    if choice.kind == "every":
        wanted = max(1, math.ceil(timing.duration / choice.every_s - 1e-9))
        if wanted > len(timing.times) and len(timing.times) <= MAX_FRAMES:
            notes.append(worded(f"{setting('frames', choice.text)} is finer than the video's {len(timing.times)} "
                                "frames: all of them are given"))
            return list(timing.times)
        if wanted > MAX_FRAMES:
            notes.append(worded(f"{setting('frames', choice.text)} asks for {wanted} frames, over the cap of {MAX_FRAMES}: "
                         f"only the first {MAX_FRAMES} (to {(MAX_FRAMES - 1) * choice.every_s:.2f} s) are given; "
                         "choose a longer interval to see the whole video"))
            wanted = MAX_FRAMES
        return [i * choice.every_s for i in range(wanted)]
    return _count_targets(choice.count, timing, notes)


def _count_targets(count: int, timing: Timing, notes: list[str]) -> list[float]:
    if len(timing.times) <= count:
        if len(timing.times) < count:
            notes.append(f"the video has only {len(timing.times)} frames, fewer than the {count} asked: "
                         f"all {len(timing.times)} are given")
        return list(timing.times)
    return _evenly(count, timing.duration)


def video_frames(path: str | Path, choice: str | None = None) -> VideoFrames:
    """The frames of the video at ``path`` that ``choice`` (default: the ``frames`` setting) picks."""
    return _video_frames(Path(path), choice)


def _video_frames(path: Path, choice: str | None, *, seek: bool = True,
                  stats: DecodeStats | None = None) -> VideoFrames:
    """:func:`video_frames`; ``seek=False`` decodes in one pass from the start (the tests and the
    benchmark compare the two), and ``stats`` is filled with what the decoding did."""
    text = str(settings.value("frames") if choice is None else choice)
    parsed = parse_frames(text)
    size = check_regular(path, "video", FIX).st_size
    cap = max_input_bytes()
    if size > cap:
        raise BadInput(f"video '{path}' is {size:,} bytes, above the {cap / (1 << 20):.3g} MiB input limit: "
                       f"shorten it, or raise {setting('max_input_mb')}", "too large")
    timing = read_timing(path)
    notes: list[str] = []
    targets = _targets(parsed, timing, notes)
    picked = sorted({nearest(timing.times, t) for t in targets})
    if len(picked) < len(targets):
        notes.append(f"{len(targets)} frame times fall on {len(picked)} distinct frames: {len(picked)} are given")
    got = decode_frames(path, timing, picked, ImageSettings.current().max_side, seek=seek, stats=stats)
    missing = len(picked) - len(got)
    if missing:
        notes.append(f"{missing} of the {len(picked)} frames picked could not be decoded: {len(got)} are given")
    if not got:
        raise BadInput(f"video '{path}' cannot be decoded (no frame decodes): {FIX}", "no frame decodes")
    frames = [ImageRef(source=str(path), label=f"frame {n} at {at:.2f} s", data=data, at_s=round(at, 3))
              for n, (at, data) in enumerate((got[i] for i in sorted(got)), start=1)]
    return VideoFrames(frames=frames, duration_s=timing.duration, choice=parsed.text, notes=notes, source=str(path))


__all__ = ["FrameChoice", "MAX_FRAMES", "MAX_KEY_FRAMES", "VIDEO_SUFFIXES", "VideoFrames", "parse_frames",
           "video_frames"]
