"""``veriscale track`` over a robot rollout's video and a folder of frames, end to end against the
vision TEST DOUBLE (``VisionRecordingServer``: no vision model installs offline). Checkpoint t sees
frames 1…t and nothing after them; the curve follows what the frames show."""

from __future__ import annotations

import json

import pytest

from tests.data.video_files import make_video
from tests.inputs.cli import run_cli
from tests.support.vision_server import VisionRecordingServer, solid

GROWING = ((0, 0, 0), (0, 80, 0), (0, 160, 0), (0, 250, 0))


@pytest.fixture(scope="module")
def server():
    with VisionRecordingServer() as srv:
        yield srv


def _track(server, target, tmp_path, *flags):
    (tmp_path / "task.md").write_text("Paint the wall green.\n")
    proc = run_cli(*flags, "track", str(target), "--task", str(tmp_path / "task.md"),
                   "--model", f"{server.url}#vision-double", "--store", str(tmp_path / "s.sqlite"), "--json")
    assert proc.returncode == 0, proc.stderr
    (curve,) = json.loads(proc.stdout)["curves"]
    return curve


def _checkpoint_calls(server, since):
    return [r for r in server.requests[since:] if "## Steps so far" in json.dumps(r["body"])]


def test_a_video_rollouts_progress_rises_with_its_frames_and_each_checkpoint_sees_only_its_past(tmp_path, server):
    clip = make_video(tmp_path / "rollout.mp4", seconds=4, fps=5, colours=GROWING)
    before = len(server.requests)
    curve = _track(server, clip, tmp_path, "--frames", "4")
    values = [p["value"] for p in curve["points"]]
    assert [p["step"] for p in curve["points"]] == [1, 2, 3, 4]
    assert all(a < b for a, b in zip(values, values[1:])), values
    assert curve["voc"] == pytest.approx(1.0)
    for t, point in enumerate(curve["points"], 1):
        assert [f["step"] for f in point["frames"]] == list(range(1, t + 1))
        assert point["frames"][-1]["label"].startswith(f"frame {t} at ")
    calls = sorted(_checkpoint_calls(server, before), key=lambda r: len(r["images"]))
    assert [len(r["images"]) for r in calls] == [1, 2, 3, 4]  # causal: checkpoint t carries frames 1..t
    for shorter, longer in zip(calls, calls[1:]):  # each checkpoint's prompt extends the one before
        a = [m for m in shorter["body"]["messages"] if m["role"] == "user"][0]["content"]
        b = [m for m in longer["body"]["messages"] if m["role"] == "user"][0]["content"]
        assert b[:len(a) - 1] == a[:-1]


def test_a_frame_folder_is_tracked_in_natural_order(tmp_path, server):
    frames = tmp_path / "shots"
    frames.mkdir()
    for i, rgb in zip((1, 2, 10), GROWING[1:]):
        (frames / f"shot{i}.png").write_bytes(solid(rgb))
    curve = _track(server, frames, tmp_path)
    assert [p["frames"][-1]["label"] for p in curve["points"]] == ["shot1.png", "shot2.png", "shot10.png"]
    values = [p["value"] for p in curve["points"]]
    assert values == sorted(values) and values[0] < values[-1]


def test_the_embedded_model_refuses_a_video_to_track_in_one_sentence(tmp_path):
    clip = make_video(tmp_path / "rollout.mp4", seconds=1, fps=5)
    (tmp_path / "task.md").write_text("Paint the wall green.\n")
    proc = run_cli("track", str(clip), "--task", str(tmp_path / "task.md"), "--store", str(tmp_path / "s.sqlite"))
    assert proc.returncode != 0
    assert "has no vision" in proc.stderr and "--mmproj" in proc.stderr and "Traceback" not in proc.stderr


def test_a_checkpoint_counts_each_frame_at_the_cost_models_check_measured(tmp_path, server):
    from veriscale.engine.store import Store
    from veriscale.models.uri import load_backend
    from veriscale.models.vision_probe import DEFAULT_IMAGE_TOKENS
    from veriscale.progress.progress_judge import ProgressJudge
    from tests.support.vision_server import IMAGE_TOKENS

    store_path = tmp_path / "s.sqlite"
    judge = ProgressJudge(load_backend(f"{server.url}#vision-double"), store=Store.open(store_path))
    assert judge.new_log("Paint the wall green.").image_tokens == DEFAULT_IMAGE_TOKENS  # not measured yet
    assert run_cli("models", "check", f"{server.url}#vision-double", "--store", str(store_path)).returncode == 0
    judge = ProgressJudge(load_backend(f"{server.url}#vision-double"), store=Store.open(store_path))
    assert judge.new_log("Paint the wall green.").image_tokens == IMAGE_TOKENS


def test_following_a_live_run_scores_each_new_frame_read_beside_the_steps_file(tmp_path, server):
    run = tmp_path / "live"
    (run / "cam").mkdir(parents=True)
    lines = [json.dumps({"task": "Paint the wall green."})]
    for i, rgb in enumerate(GROWING, 1):
        (run / "cam" / f"{i}.png").write_bytes(solid(rgb))
        lines.append(json.dumps({"role": "environment", "text": f"camera {i}", "images": [f"cam/{i}.png"]}))
    lines.append(json.dumps({"done": True}))
    (run / "steps.jsonl").write_text("\n".join(lines) + "\n")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()  # relative image paths are read beside the steps file, not from the working folder
    proc = run_cli("track", "--follow", str(run / "steps.jsonl"), "--idle-timeout", "30",
                   "--model", f"{server.url}#vision-double", "--store", str(tmp_path / "s.sqlite"), "--json",
                   cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    (curve,) = json.loads(proc.stdout)["curves"]
    values = [p["value"] for p in curve["points"]]
    assert len(values) == 4 and all(a < b for a, b in zip(values, values[1:])), values
    assert [len(p["frames"]) for p in curve["points"]] == [1, 2, 3, 4]
