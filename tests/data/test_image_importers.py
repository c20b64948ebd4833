"""Issue 34: images and video frames read by the importers (frames.py, folder.py, atif.py, inspect_log.py)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from PIL import Image

from veriscale import settings
from veriscale.data.images import load_image
from veriscale.data.importers import frames, load_candidates, load_file
from veriscale.data.reader import BadInput

from tests.data.video_files import BLUE, GREEN, RED, colour_of, make_video


def png(path: Path, colour: tuple[int, int, int] = (10, 20, 30)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 6), colour).save(path, "PNG")
    return path


def data_url(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def test_a_folder_of_frames_is_one_candidate_in_natural_order(tmp_path: Path) -> None:
    run = tmp_path / "run-1"
    for name in ("frame10.png", "frame2.png", "frame1.png", "Frame3.jpg"):
        png(run / name)
    (run / "task.md").write_text("Stack the red block on the blue one.\n")
    name, (candidate,) = load_file(run)
    assert name == "frames" and candidate.id == "run-1" and candidate.source == str(run)
    assert [ref.label for ref in candidate.images] == ["frame1.png", "frame2.png", "Frame3.jpg", "frame10.png"]
    assert candidate.images[0].source == str(run / "frame1.png") and candidate.images[0].at_s is None
    assert candidate.text == "4 frames: frame1.png … frame10.png"
    assert candidate.task is not None and candidate.task.text == "Stack the red block on the blue one."
    assert candidate.metadata["frames_order"] == "name" and "task.md" not in candidate.artifacts


def test_frames_whose_names_all_carry_a_time_are_ordered_by_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for name in ("cam_b_t10.5s.png", "cam_a_t1.25s.png", "cam_c_t2.5s.png"):
        png(run / name)
    (candidate,) = load_candidates([run])
    assert [ref.label for ref in candidate.images] == ["cam_a_t1.25s.png", "cam_c_t2.5s.png", "cam_b_t10.5s.png"]
    assert [ref.at_s for ref in candidate.images] == [0.0, 1.25, 9.25]
    assert candidate.metadata["frames_order"] == "time in name"
    stamped = tmp_path / "stamped"
    for name in ("shot-2024-05-01T10-00-09.png", "shot-2024-05-01T09-59-58.png"):
        png(stamped / name)
    (candidate,) = frames.load(stamped)
    assert [ref.at_s for ref in candidate.images] == [0.0, 11.0]


def test_a_folder_of_frame_rollouts_is_one_candidate_each(tmp_path: Path) -> None:
    png(tmp_path / "runs" / "run-a" / "step2.png")
    png(tmp_path / "runs" / "run-a" / "step1.png")
    png(tmp_path / "runs" / "run-b" / "only.png")
    (tmp_path / "runs" / "task.md").write_text("Open the settings page.\n")
    name, candidates = load_file(tmp_path / "runs")
    assert name == "folder" and [c.id for c in candidates] == ["run-a", "run-b"]
    assert [r.label for r in candidates[0].images] == ["step1.png", "step2.png"]
    assert candidates[1].text == "1 frame: only.png"
    assert all(c.task is not None and c.task.text == "Open the settings page." for c in candidates)


def test_a_rollout_with_text_keeps_its_answer_and_no_images(tmp_path: Path) -> None:
    sub = tmp_path / "runs" / "run-1"
    png(sub / "screen.png")
    (sub / "answer.md").write_text("Done: the page is open.\n")
    (candidate,) = load_candidates([tmp_path / "runs"])
    assert candidate.text == "Done: the page is open.\n" and candidate.images == []
    assert set(candidate.artifacts) == {"answer.md", "screen.png"}


def test_a_folder_with_no_images_is_one_sentence(tmp_path: Path) -> None:
    folder = tmp_path / "shots"
    folder.mkdir()
    (folder / "task.md").write_text("Look.\n")
    with pytest.raises(BadInput) as err:
        frames.load(folder)
    text = str(err.value)
    assert f"folder '{folder}' holds no images" in text and "give a folder of images" in text and "\n" not in text
    with pytest.raises(BadInput, match="holds no images"):
        load_file(folder, "frames")
    assert not frames.detect(folder)


def test_a_video_file_is_a_candidate_of_its_frames(tmp_path: Path) -> None:
    clip = make_video(tmp_path / "clip.mp4")
    settings.choose({"frames": "3"})
    name, (candidate,) = load_file(clip)
    assert name == "frames" and candidate.id == "clip" and candidate.source == str(clip)
    assert [colour_of(ref.data or b"") for ref in candidate.images] == [RED, GREEN, BLUE]
    assert candidate.metadata["video"] == {"source": str(clip), "duration_s": 3.0, "frames": "3", "notes": []}
    assert candidate.text == "video clip.mp4 (3.00 s): 3 frames: frame 1 at 0.50 s … frame 3 at 2.50 s"
    part = load_image(candidate.images[1])
    assert part.label == "frame 2 at 1.50 s" and part.at_s == 1.5


def test_a_rollout_folder_with_one_video_and_a_task(tmp_path: Path) -> None:
    run = tmp_path / "run-7"
    run.mkdir()
    make_video(run / "screen.mp4")
    (run / "task.txt").write_text("Drive to the blue square.\n")
    (run / "result.json").write_text(json.dumps({"reward": 1}))
    settings.choose({"frames": "every:1"})
    name, (candidate,) = load_file(run)
    assert name == "frames" and candidate.id == "run-7" and len(candidate.images) == 3
    assert candidate.task is not None and candidate.task.text == "Drive to the blue square."
    assert candidate.metadata["video"]["frames"] == "every:1" and candidate.labels == {"reward": 1}


def test_a_damaged_video_candidate_is_one_sentence(tmp_path: Path) -> None:
    fake = tmp_path / "run.mp4"
    fake.write_bytes(b"\x00\x01 not a video" * 20)
    with pytest.raises(BadInput, match=r"video '.*run\.mp4' cannot be decoded .*: give an MP4, WebM or MKV file"):
        load_candidates([fake])


def test_atif_screenshots_land_on_their_steps(tmp_path: Path) -> None:
    shot = png(tmp_path / "shots" / "step2.png", (1, 2, 3))
    inline = png(tmp_path / "inline.png", (4, 5, 6))
    goal = png(tmp_path / "goal.png")
    trajectory = {"schema_version": "ATIF-v1.6", "session_id": "s1", "steps": [
        {"step_id": 1, "source": "user", "message": [
            {"type": "text", "text": "Make the page look like this."},
            {"type": "image", "source": {"media_type": "image/png", "path": "goal.png"}}]},
        {"step_id": 2, "source": "agent", "message": "I take a screenshot.",
         "tool_calls": [{"tool_call_id": "c1", "function_name": "screenshot", "arguments": {}}],
         "observation": {"results": [{"source_call_id": "c1", "content": [
             {"type": "text", "text": "captured"},
             {"type": "image", "source": {"media_type": "image/png", "path": "shots/step2.png"}}]}]}},
        {"step_id": 3, "source": "agent", "message": [
            {"type": "text", "text": "Here it is."},
            {"type": "image", "source": {"media_type": "image/png", "data": base64.b64encode(inline.read_bytes()).decode()}}]},
    ]}
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(trajectory))
    name, (candidate,) = load_file(path)
    assert name == "atif"
    steps = candidate.trajectory.steps if candidate.trajectory else []
    assert [s.observation for s in steps] == ["captured\n[image]", ""]
    assert [[r.source for r in s.images] for s in steps][0] == [str(shot)]
    assert [r.label for r in steps[0].images] == ["step 2 image 1"]
    assert steps[1].images[0].source.startswith("data:image/png;base64,")
    assert load_image(steps[1].images[0]).key() == load_image(steps[1].images[0].__class__(str(inline))).key()
    assert candidate.task is not None and [r.source for r in candidate.task.images] == [str(goal)]
    assert candidate.images == [] and candidate.text == "Here it is.\n[image]"


def test_inspect_screenshots_land_on_the_step_that_called_the_tool(tmp_path: Path) -> None:
    shot = png(tmp_path / "shot.png", (9, 9, 9))
    url = data_url(shot)
    log = {"eval": {"task": "web", "model": "openai/gpt-4o"}, "samples": [{
        "id": 1, "epoch": 1, "input": [{"role": "user", "content": [
            {"type": "text", "text": "Find the login button."}, {"type": "image", "image": "attachment://abc"}]}],
        "attachments": {"abc": url},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Find the login button."},
                                         {"type": "image", "image": "attachment://abc"}]},
            {"role": "assistant", "content": "Looking.", "tool_calls": [
                {"id": "t1", "function": "computer", "arguments": {"action": "screenshot"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": [{"type": "image", "image": url}]},
            {"role": "assistant", "content": "It is top right."}],
        "scores": {"match": {"value": "C"}}}]}
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    name, (candidate,) = load_file(path)
    assert name == "inspect-log"
    steps = candidate.trajectory.steps if candidate.trajectory else []
    assert [len(s.images) for s in steps] == [1, 0]
    assert steps[0].images[0].source == url and steps[0].images[0].label == "step 1 image 1"
    assert steps[0].observation == "[image]" and candidate.text == "It is top right."
    assert candidate.task is not None and candidate.task.text == "Find the login button.\n[image]"
    assert [r.source for r in candidate.task.images] == [url]
    assert candidate.images == [] and candidate.labels["score"] == 1.0
