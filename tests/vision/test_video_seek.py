"""Issue: a long video's few frames are reached by seeking to the key frame before each one, not by
decoding the whole video from the start; the frames given are exactly those of the pass from the start.

The videos are written by PyAV itself (no fixture files): every frame a colour and a square at a
place of its own, so a frame taken from the wrong place (or decoded without its reference frames)
gives other PNG bytes. H.264 where the wheel has libx264 (with B-frames, so frames are reordered),
else MPEG-4 Part 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.data.video_files import write_video
from veriscale.data import video_decode
from veriscale.data.video import VideoFrames, _video_frames, video_frames
from veriscale.data.video_decode import DecodeStats

FRAMES, FPS = 300, 30  # 10 s


def make_numbered_video(path: Path, frames: int = FRAMES, fps: int = FPS, gop: int = 10,
                        size: tuple[int, int] = (64, 48)) -> Path:
    """A video whose frame i has a colour and a square position of its own, a key frame each
    ``gop`` frames (and no others: no key frames at scene cuts)."""
    width, height = size

    def paint(i: int, pixels: Any) -> None:
        pixels[:] = ((i * 37) % 256, (i * 11) % 256, 255 - i % 256)
        x = i % (width - 8)
        pixels[height // 4:height // 4 + 8, x:x + 8] = 255

    write_video(path, frames, fps, size, gop, paint, preset="veryfast")  # veryfast keeps B-frames
    return path


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("seek_videos")
    return {
        "gop10": make_numbered_video(folder / "gop10.mp4"),
        "gop10_mkv": make_numbered_video(folder / "gop10.mkv"),
        "one_key": make_numbered_video(folder / "one_key.mp4", gop=1000),  # a single key frame, at the start
    }


def shown(clip: VideoFrames) -> list[tuple[Any, ...]]:
    return [(f.at_s, f.label, f.data) for f in clip.frames]


def both(path: Path, choice: str) -> tuple[VideoFrames, DecodeStats, VideoFrames, DecodeStats]:
    seek_stats, pass_stats = DecodeStats(), DecodeStats()
    sought = _video_frames(path, choice, stats=seek_stats)
    passed = _video_frames(path, choice, seek=False, stats=pass_stats)
    return sought, seek_stats, passed, pass_stats


def test_the_test_video_has_a_key_frame_each_ten_frames(videos: dict[str, Path]) -> None:
    timing = video_decode.read_timing(videos["gop10"])
    assert len(timing.times) == FRAMES
    assert [round(k * FPS) for k in timing.keys] == list(range(0, FRAMES, 10))
    assert len(timing.key_pts) == len(timing.keys) and timing.untimed == 0
    assert video_decode.read_timing(videos["one_key"]).keys == [0.0]


@pytest.mark.parametrize("choice", ["8", "every:1", "keys", "3"])
@pytest.mark.parametrize("name", ["gop10", "gop10_mkv"])
def test_seeking_gives_exactly_the_frames_of_the_pass_from_the_start(videos: dict[str, Path], name: str,
                                                                      choice: str) -> None:
    sought, seek_stats, passed, pass_stats = both(videos[name], choice)
    assert shown(sought) == shown(passed) and sought.frames
    assert len({f.data for f in sought.frames}) == len(sought.frames)  # every frame distinct
    assert sought.notes == passed.notes and sought.duration_s == passed.duration_s
    assert seek_stats.seeks > 0 and seek_stats.sequential == "" and pass_stats.seeks == 0
    assert seek_stats.decoded < pass_stats.decoded


def test_eight_frames_of_a_long_video_decode_a_small_part_of_it(videos: dict[str, Path]) -> None:
    sought, seek_stats, passed, pass_stats = both(videos["gop10"], "8")
    assert shown(sought) == shown(passed) and len(sought.frames) == 8
    # each of the 8 frames is at most 9 frames past its key frame: at most 80 decoded, not ~280
    assert seek_stats.decoded <= 8 * 10 and pass_stats.decoded >= 250
    assert seek_stats.decoded * 3 < pass_stats.decoded
    assert shown(video_frames(videos["gop10"], "8")) == shown(sought)  # the public call seeks too


@pytest.mark.parametrize("choice", ["8", "every:1", "keys", "3", "every:0.1", "256"])
def test_a_video_with_a_single_key_frame_gives_the_same_frames(videos: dict[str, Path], choice: str) -> None:
    sought, seek_stats, passed, pass_stats = both(videos["one_key"], choice)
    assert shown(sought) == shown(passed) and sought.notes == passed.notes and sought.frames
    assert seek_stats.seeks == 0 and seek_stats.sequential == ""  # nothing to seek to: forward from the start
    assert seek_stats.decoded == pass_stats.decoded


@pytest.mark.parametrize("choice", ["every:0.1", "256"])
def test_many_frames_close_together_are_the_same_too(videos: dict[str, Path], choice: str) -> None:
    sought, _, passed, _ = both(videos["gop10"], choice)
    assert shown(sought) == shown(passed)


class _Container:
    """A real PyAV container whose seeks misbehave as ``mode`` says: "fails" (an FFmpeg error),
    "untimed" (frames after a seek lose their timestamps) or "overshoots" (lands two seconds on)."""

    def __init__(self, real: Any, mode: str) -> None:
        self._real, self._mode, self._sought = real, mode, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def seek(self, offset: int, **kwargs: Any) -> None:
        import av

        if self._mode == "fails":
            raise av.FFmpegError(38, "Function not implemented")
        self._sought = True
        stream = kwargs["stream"]
        extra = round(2 / stream.time_base) if self._mode == "overshoots" else 0
        self._real.seek(offset + extra, **kwargs)

    def decode(self, *args: Any) -> Iterator[Any]:
        for frame in self._real.decode(*args):
            if self._sought and self._mode == "untimed":
                frame.pts = None
            yield frame


@pytest.mark.parametrize("mode, why", [("fails", "the seek failed (FFmpegError)"),
                                       ("untimed", "a frame decoded after a seek has no timestamp"),
                                       ("overshoots", "a seek landed past the frame wanted")])
def test_a_seek_that_cannot_be_trusted_falls_back_to_the_pass_from_the_start(
        videos: dict[str, Path], monkeypatch: pytest.MonkeyPatch, mode: str, why: str) -> None:
    path = videos["gop10"]
    _, _, passed, _ = both(path, "8")
    real_open = video_decode.open_video
    monkeypatch.setattr(video_decode, "open_video", lambda p: _Container(real_open(p), mode))
    stats = DecodeStats()
    clip = _video_frames(path, "8", stats=stats)
    assert shown(clip) == shown(passed) and clip.notes == passed.notes == []  # no frame dropped
    assert stats.seeks == (0 if mode == "fails" else 1) and stats.sequential == why
