"""Issue 34: a video decoded to the frames a verdict sees (veriscale.data.video), with real PyAV.

Each test video is 3 s at 10 fps, red for the first second, green for the second, blue for the third,
so a frame's colour says which second it came from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from veriscale import settings
from veriscale.data.reader import BadInput
from veriscale.data.video import FrameChoice, parse_frames, video_frames
from veriscale.errors import settings_in

from tests.data.video_files import BLUE, GREEN, RED, colour_of, make_video

pytest.importorskip("av")


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("videos")
    return {
        "one_key": make_video(folder / "one_key.mp4"),  # a single key frame, at the start
        "keys": make_video(folder / "keys.mp4", key_every=10),  # a key frame each second
        "dense": make_video(folder / "dense.mp4", fps=100, key_every=50),  # 300 frames
    }


def one_sentence(err: BadInput, *parts: str) -> str:
    text = str(err)
    assert "\n" not in text and text.count(". ") == 0, text
    for part in parts:
        assert part in text, (part, text)
    return text


def test_n_evenly_spaced_frames_come_from_the_middle_of_each_part(videos: dict[str, Path]) -> None:
    clip = video_frames(videos["one_key"], "3")
    assert [f.at_s for f in clip.frames] == [0.5, 1.5, 2.5]
    assert [colour_of(f.data or b"") for f in clip.frames] == [RED, GREEN, BLUE]
    assert [f.label for f in clip.frames] == ["frame 1 at 0.50 s", "frame 2 at 1.50 s", "frame 3 at 2.50 s"]
    assert all(f.source == str(videos["one_key"]) and (f.data or b"").startswith(b"\x89PNG") for f in clip.frames)
    assert clip.duration_s == pytest.approx(3.0, abs=0.01) and clip.choice == "3" and clip.notes == []
    assert clip.metadata() == {"source": str(videos["one_key"]), "duration_s": 3.0, "frames": "3", "notes": []}


def test_the_frames_setting_is_the_default_and_times_increase(videos: dict[str, Path]) -> None:
    clip = video_frames(videos["keys"])  # the default: 8
    times = [f.at_s or 0.0 for f in clip.frames]
    assert len(clip.frames) == 8 and times == sorted(times) and len(set(times)) == 8
    settings.choose({"frames": "every:1.5", "image_max_side": 32})
    clip = video_frames(videos["keys"])
    assert clip.choice == "every:1.5" and [f.at_s for f in clip.frames] == [0.0, 1.5]
    assert [colour_of(f.data or b"") for f in clip.frames] == [RED, GREEN]
    from PIL import Image
    import io

    assert Image.open(io.BytesIO(clip.frames[0].data or b"")).size == (32, 24)  # shrunk to image_max_side


def test_every_s_takes_one_frame_each_interval(videos: dict[str, Path]) -> None:
    clip = video_frames(videos["one_key"], "every:1")
    assert [f.at_s for f in clip.frames] == [0.0, 1.0, 2.0]
    assert [colour_of(f.data or b"") for f in clip.frames] == [RED, GREEN, BLUE]


def test_every_s_is_capped_at_256_frames_and_says_so(videos: dict[str, Path]) -> None:
    clip = video_frames(videos["dense"], "every:0.01")
    assert len(clip.frames) == 256 and clip.frames[-1].at_s == pytest.approx(2.55)
    assert len(clip.notes) == 1 and "over the cap of 256" in clip.notes[0] and "every:0.01" in clip.notes[0]


def test_every_s_finer_than_the_frames_gives_them_all_with_a_note(videos: dict[str, Path]) -> None:
    clip = video_frames(videos["one_key"], "every:0.01")
    assert len(clip.frames) == 30
    assert len(clip.notes) == 1 and "all of them are given" in clip.notes[0]


def test_keys_gives_the_key_frames(videos: dict[str, Path]) -> None:
    clip = video_frames(videos["keys"], "keys")
    assert [f.at_s for f in clip.frames] == [0.0, 1.0, 2.0]
    assert [colour_of(f.data or b"") for f in clip.frames] == [RED, GREEN, BLUE]
    assert clip.notes == []


def test_keys_with_one_key_frame_falls_back_to_8_evenly_spaced(videos: dict[str, Path]) -> None:
    clip = video_frames(videos["one_key"], "keys")
    assert len(clip.frames) == 8
    assert len(clip.notes) == 1 and "fewer than 2" in clip.notes[0] and "8 evenly spaced" in clip.notes[0]


def test_fewer_frames_than_asked_returns_all_with_a_note(videos: dict[str, Path]) -> None:
    clip = video_frames(videos["one_key"], "64")
    assert len(clip.frames) == 30 and [f.at_s for f in clip.frames][:3] == [0.0, 0.1, 0.2]
    assert clip.notes == ["the video has only 30 frames, fewer than the 64 asked: all 30 are given"]


def test_not_a_video_truncated_and_a_folder_are_one_sentence(tmp_path: Path, videos: dict[str, Path]) -> None:
    fake = tmp_path / "fake.mp4"
    fake.write_bytes(b"this is not a video at all\n" * 50)
    with pytest.raises(BadInput) as err:
        video_frames(fake, "3")
    one_sentence(err.value, "video '", "fake.mp4' cannot be decoded (", "): give an MP4, WebM or MKV file")
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(videos["keys"].read_bytes()[: videos["keys"].stat().st_size // 2])
    with pytest.raises(BadInput) as err:
        video_frames(cut, "3")
    one_sentence(err.value, "cut.mp4' cannot be decoded", "with a video stream")
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(BadInput, match="cannot be decoded"):
        video_frames(empty, "3")
    folder = tmp_path / "clips"
    folder.mkdir()
    with pytest.raises(BadInput) as err:
        video_frames(folder, "3")
    one_sentence(err.value, "is a folder, not a regular file")
    with pytest.raises(BadInput) as err:
        video_frames(tmp_path / "missing.mp4", "3")
    one_sentence(err.value, "does not exist")


def test_a_file_with_no_video_stream_is_one_sentence(tmp_path: Path) -> None:
    import av
    import numpy as np

    path = tmp_path / "sound.mkv"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("pcm_s16le", rate=8000)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format="s16", layout="mono")
        frame.sample_rate, frame.pts = 8000, 0
        for packet in [*stream.encode(frame), *stream.encode()]:
            container.mux(packet)
    with pytest.raises(BadInput) as err:
        video_frames(path, "3")
    one_sentence(err.value, "sound.mkv' cannot be decoded (it has no video stream): give an MP4, WebM or MKV")


def test_a_video_over_the_input_limit_names_the_setting(videos: dict[str, Path]) -> None:
    settings.choose({"max_input_mb": 0.001})
    with pytest.raises(BadInput) as err:
        video_frames(videos["keys"], "3")
    assert "above the" in str(err.value) and settings_in(err.value.template) == ["max_input_mb"]


def test_parse_frames_reads_the_three_forms() -> None:
    assert parse_frames("8") == FrameChoice("count", "8", count=8)
    assert parse_frames(" 256 ") == FrameChoice("count", "256", count=256)
    assert parse_frames("008") == FrameChoice("count", "8", count=8)
    assert parse_frames("every:0.5") == FrameChoice("every", "every:0.5", every_s=0.5)
    assert parse_frames("KEYS") == FrameChoice("keys", "keys")


@pytest.mark.parametrize("text", ["0", "257", "every:0", "every:-1", "every:x", "every:inf", "all", "", "8.5", "\u00b2"])
def test_parse_frames_refuses_anything_else_in_one_sentence(text: str) -> None:
    with pytest.raises(BadInput) as err:
        parse_frames(text)
    one_sentence(err.value, "not a frame choice", "N (1 to 256", "every:S", "keys")
    assert settings_in(err.value.template) == ["frames"]
    with pytest.raises(BadInput):
        video_frames("never-opened.mp4", text)  # the choice is checked before the file
