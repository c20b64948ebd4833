"""A video's frames decoded: where its frames lie (:func:`read_timing`, from the packets alone) and
the frames at chosen places as PNG bytes (:func:`decode_frames`), with PyAV.

The frames are decoded in order; to reach a frame past the next key frame the decoder seeks to the
key frame before it and decodes forward from there, so a long video with few frames picked is not
decoded whole. Where the file cannot seek, or its frames lack the timestamps that place them after
a seek, the rest are decoded in one pass from the start instead, which gives the same frames::

    timing = read_timing(path)                       # Timing: every frame's time, the key frames
    i = nearest(timing.times, 12.5)                  # the frame nearest 12.5 s from the start
    got = decode_frames(path, timing, [i], max_side=1024)   # {i: (time, PNG bytes)}
    stats = DecodeStats(); decode_frames(path, timing, [i], 1024, seek=False, stats=stats)

:mod:`veriscale.data.video` chooses which frames (the ``frames`` setting) and builds on this.
"""

from __future__ import annotations

import io
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriscale.data.images import vision_extra
from veriscale.data.reader import BadInput

FIX = "give an MP4, WebM or MKV file with a video stream"


def av_module() -> Any:
    """PyAV, or one sentence naming the extra that installs it."""
    try:
        import av
    except ImportError:
        raise vision_extra("PyAV (av)") from None
    return av


def decode_error(path: Path, exc: BaseException) -> BadInput:
    why = getattr(exc, "strerror", None) or type(exc).__name__
    return BadInput(f"video '{path}' cannot be decoded ({str(why).rstrip('.')}): {FIX}", "cannot be decoded")


def open_video(path: Path) -> Any:
    av = av_module()

    try:
        return av.open(str(path), mode="r")
    except (av.FFmpegError, OSError, ValueError, EOFError, UnicodeDecodeError) as exc:
        raise decode_error(path, exc) from None


def video_stream(container: Any, path: Path) -> Any:
    if not container.streams.video:
        container.close()
        raise BadInput(f"video '{path}' cannot be decoded (it has no video stream): {FIX}", "no video stream")
    stream = container.streams.video[0]
    try:
        stream.thread_type = "AUTO"  # decode on every core where the codec can
    except (AttributeError, ValueError, TypeError):
        pass
    return stream


@dataclass(frozen=True)
class Timing:
    """Where the frames of a video lie, from its packets (no decoding): times from the first frame."""

    start: float  # the first frame's presentation time, in the stream's seconds
    times: list[float]  # every frame's time, from the start, sorted
    keys: list[float]  # the key frames' times, from the start, sorted
    duration: float
    key_pts: list[int] = field(default_factory=list)  # the key frames' pts (stream time base), as ``keys``
    untimed: int = 0  # packets with no timestamp (their frames can only be placed by order)


def read_timing(path: Path) -> Timing:
    av = av_module()

    container = open_video(path)
    untimed = 0
    try:
        stream = video_stream(container, path)
        raw: list[tuple[float, bool, int]] = []
        for packet in container.demux(stream):
            if packet.size == 0:
                continue
            if packet.pts is None or packet.time_base is None:
                untimed += 1
                continue
            raw.append((float(packet.pts * packet.time_base), bool(packet.is_keyframe), int(packet.pts)))
        rate = stream.average_rate or stream.guessed_rate
        declared = float(stream.duration * stream.time_base) if stream.duration and stream.time_base else 0.0
        if not declared and container.duration:
            declared = container.duration / av.time_base
    except (av.FFmpegError, OSError, ValueError, EOFError) as exc:
        raise decode_error(path, exc) from None
    finally:
        container.close()
    if not raw:
        raise BadInput(f"video '{path}' cannot be decoded (its video stream holds no frames): {FIX}", "no frames")
    raw.sort()
    start = raw[0][0]
    times = [t - start for t, _, _ in raw]
    step = 1.0 / float(rate) if rate else (times[-1] / max(1, len(times) - 1) if len(times) > 1 else 0.0)
    duration = max(declared, times[-1] + step)
    return Timing(start, times, [t - start for t, key, _ in raw if key], duration,
                   key_pts=[pts for _, key, pts in raw if key], untimed=untimed)


def _png(frame: Any, max_side: int) -> bytes:
    image = frame.to_image()
    if max_side and max(image.size) > max_side:
        image.thumbnail((max_side, max_side))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def nearest(times: list[float], target: float) -> int:
    """The index of the time in sorted ``times`` nearest ``target`` (the earlier on a tie)."""
    i = bisect_left(times, target)
    if i == 0:
        return 0
    if i == len(times):
        return len(times) - 1
    return i - 1 if target - times[i - 1] <= times[i] - target else i


@dataclass
class DecodeStats:
    """What decoding one video's frames did (for the tests and the benchmark): frames the decoder
    gave, seeks made, and why the sequential pass from the start was used (empty when it was not)."""

    decoded: int = 0
    seeks: int = 0
    sequential: str = ""


class _NoSeek(Exception):
    """Seeking cannot go on for this video; the message says why."""


def _place(frame: Any, timing: Timing) -> int | None:
    """A decoded frame's index in ``timing.times`` by its timestamp; None when it has none."""
    if frame.pts is None or frame.time_base is None:
        return None
    return nearest(timing.times, float(frame.pts * frame.time_base) - timing.start)


def decode_frames(path: Path, timing: Timing, wanted: list[int], max_side: int, *, seek: bool = True,
            stats: DecodeStats | None = None) -> dict[int, tuple[float, bytes]]:
    """The frames at indexes ``wanted`` of ``timing.times`` (presentation order), as PNG bytes.

    With ``seek``, each wanted frame past the next key frame is reached by seeking to the key
    frame before it; whatever that leaves undone (the file cannot seek, a frame after a seek has no
    timestamp, a wanted frame was passed without being seen) is decoded in one pass from the start,
    which gives exactly what the pass alone would. Without ``seek``, only that pass."""
    stats = DecodeStats() if stats is None else stats
    got: dict[int, tuple[float, bytes]] = {}
    if not seek:
        stats.sequential = "asked"
    elif timing.untimed:
        stats.sequential = f"{timing.untimed} packets have no timestamp"
    else:
        try:
            decode_seeking(path, timing, sorted(set(wanted)), max_side, got, stats)
        except _NoSeek as why:
            stats.sequential = str(why)
    rest = [i for i in wanted if i not in got]
    if rest:
        stats.sequential = stats.sequential or "a wanted frame was not met after seeking"
        got.update(decode_sequential(path, timing, rest, max_side, stats))
    return got


def decode_seeking(path: Path, timing: Timing, wanted: list[int], max_side: int,
                    got: dict[int, tuple[float, bytes]], stats: DecodeStats) -> None:
    """Into ``got``, the frames at the sorted indexes ``wanted``, decoded in order, seeking to the
    key frame before a wanted frame whenever that key frame lies past the next frame to decode.
    Frames before the key frame sought are never taken (they may lean on frames not decoded).
    Raises :class:`_NoSeek` when seeking cannot go on; ``got`` keeps what was decoded until then."""
    av = av_module()

    key_at = [bisect_left(timing.times, k) for k in timing.keys]  # each key frame's index
    want = set(wanted)
    container = open_video(path)
    frames: Any = None
    try:
        stream = video_stream(container, path)
        frames = container.decode(stream)
        index = -1  # the place of the last frame decoded (-1: none yet)
        floor = 0  # frames before this index are not taken (before the key frame last sought)
        sought = False
        for target in wanted:
            if target <= index:
                continue  # passed without being seen: left to the pass from the start
            k = bisect_right(key_at, target) - 1  # the key frame at or before the target
            landing = -1
            if k >= 0 and key_at[k] > index + 1:
                frames.close()
                try:
                    container.seek(timing.key_pts[k], stream=stream, backward=True, any_frame=False)
                except (av.FFmpegError, OSError, ValueError, EOFError, TypeError) as exc:
                    raise _NoSeek(f"the seek failed ({type(exc).__name__})") from None
                stats.seeks += 1
                frames = container.decode(stream)
                sought, floor, landing = True, key_at[k], key_at[k]
            for frame in frames:
                stats.decoded += 1
                place = _place(frame, timing)
                if place is None:
                    if sought:
                        raise _NoSeek("a frame decoded after a seek has no timestamp")
                    place = index + 1  # before any seek: the next place in order, as the pass does
                if landing >= 0:
                    if place > target:
                        raise _NoSeek("a seek landed past the frame wanted")
                    landing = -1
                index = place
                if index >= floor and index in want and index not in got:
                    got[index] = (timing.times[index], _png(frame, max_side))
                if index >= target:
                    break
    except (av.FFmpegError, OSError, ValueError, EOFError) as exc:
        raise _NoSeek(f"decoding after a seek failed ({type(exc).__name__})") from None
    finally:
        if frames is not None:
            frames.close()
        container.close()


def decode_sequential(path: Path, timing: Timing, wanted: list[int], max_side: int,
                       stats: DecodeStats) -> dict[int, tuple[float, bytes]]:
    """The frames at indexes ``wanted``, decoded in one pass from the start that stops after the
    last one."""
    av = av_module()

    want = set(wanted)
    last = max(want)
    got: dict[int, tuple[float, bytes]] = {}
    container = open_video(path)
    try:
        stream = video_stream(container, path)
        index = -1
        for frame in container.decode(stream):
            stats.decoded += 1
            place = _place(frame, timing)
            # a frame's place: by its timestamp where it has one, else the next place in order
            index = place if place is not None else index + 1
            if index in want and index not in got:
                got[index] = (timing.times[index], _png(frame, max_side))
            if index >= last and len(got) == len(want):
                break
    except (av.FFmpegError, OSError, ValueError, EOFError) as exc:
        raise decode_error(path, exc) from None
    finally:
        container.close()
    return got
