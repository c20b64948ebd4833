"""Best-of-N over frame pools, end to end: ``veriscale select`` reads rollout folders of frames and a
video, sends every judge call its frames as content parts, and picks the run whose frames the
(test double) vision server grades best. The server is ``VisionRecordingServer``, a TEST DOUBLE:
no vision model installs offline."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from tests.data.video_files import make_video
from tests.inputs.cli import one_sentence, run_cli
from tests.support.vision_server import VisionRecordingServer, solid

GREENS = {"dark": (0, 0, 0), "mid": (0, 110, 0), "bright": (0, 250, 0)}


def _judged(server: VisionRecordingServer, since: int) -> list[dict]:
    """The judge calls the server answered since request ``since`` (not the backend's read probes)."""
    return [r for r in server.requests[since:] if "## Criterion" in json.dumps(r["body"])]


@pytest.fixture(scope="module")
def server():
    with VisionRecordingServer() as srv:
        yield srv


def _pool(root: Path) -> Path:
    runs = root / "runs"
    runs.mkdir()
    (runs / "task.md").write_text("Turn the whole scene green.\n")
    for name, rgb in GREENS.items():
        (runs / name).mkdir()
        for i in (1, 2, 10):  # natural order: frame2 before frame10
            (runs / name / f"frame{i}.png").write_bytes(solid(rgb, (48, 48)))
    (runs / "video").mkdir()
    make_video(runs / "video" / "rollout.mp4", seconds=2, fps=5, colours=((0, 170, 0), (0, 190, 0)))
    return runs


def test_select_picks_the_greenest_run_from_frames_and_a_video(tmp_path, server):
    runs = _pool(tmp_path)
    before = len(server.requests)
    proc = run_cli("--image-max-side", "32", "--frames", "2", "select", str(runs), "--task", str(runs / "task.md"),
                   "--model", f"{server.url}#vision-double", "--store", str(tmp_path / "s.sqlite"), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    ranking = [r["id"] for r in out["ranking"]]
    assert out["best"]["id"] == "bright" and ranking[-1] == "dark", ranking
    assert ranking.index("video") < ranking.index("mid")
    by_id = {r["id"]: r for r in out["ranking"]}
    assert [f["label"] for f in by_id["bright"]["images"]] == ["frame1.png", "frame2.png", "frame10.png"]
    video = by_id["video"]["images"]
    assert len(video) == 2 and all(f["label"].startswith("frame ") and " at " in f["label"] for f in video)
    assert all(len(f["sha256"]) == 64 and f["width"] == 32 for f in by_id["mid"]["images"])

    sent = server.requests[before:]
    judged = _judged(server, before)
    assert judged and all(r["images"] for r in judged)  # no judge call went without its frames
    for r in judged:
        assert all(size[0] <= 32 and size[1] <= 32 for _, size in r["images"])
        (user,) = [m for m in r["body"]["messages"] if m["role"] == "user"]
        kinds = [p["type"] for p in user["content"]]
        assert kinds[0] == "text" and kinds[-1] == "text" and kinds.count("image_url") == len(r["images"])
        # a pair shows 3 or 2 frames per run, after that run's response block
        text = user["content"][0]["text"]
        assert "## First response" in text and "## Second response" not in text

    again = run_cli("--image-max-side", "32", "--frames", "2", "select", str(runs), "--task", str(runs / "task.md"),
                    "--model", f"{server.url}#vision-double", "--store", str(tmp_path / "s.sqlite"), "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["best"]["id"] == "bright"
    assert _judged(server, before + len(sent)) == []  # the same frames: every judge call from the cache


def test_the_same_frames_at_another_size_are_asked_again(tmp_path, server):
    runs = _pool(tmp_path)
    store = str(tmp_path / "s.sqlite")
    args = ["select", str(runs / "dark"), str(runs / "bright"), "--task", str(runs / "task.md"),
            "--model", f"{server.url}#vision-double", "--store", store, "--json"]
    first = len(server.requests)
    assert run_cli("--image-max-side", "24", *args).returncode == 0
    asked = _judged(server, first)
    assert asked and {size for r in asked for _, size in r["images"]} == {(24, 24)}
    mark = len(server.requests)
    assert run_cli("--image-max-side", "24", *args).returncode == 0
    assert _judged(server, mark) == []
    mark = len(server.requests)
    assert run_cli("--image-max-side", "40", *args).returncode == 0
    again = _judged(server, mark)
    assert len(again) == len(asked) and {size for r in again for _, size in r["images"]} == {(40, 40)}


def test_bad_frame_inputs_get_one_sentence_and_nothing_is_judged(tmp_path, server):
    runs = _pool(tmp_path)
    before = len(server.requests)
    (runs / "empty").mkdir()  # a folder with no frames among frame folders
    (runs / "empty" / "notes.txt").write_text("no frames here")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "rollout.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 not really a video")
    big = tmp_path / "big"
    big.mkdir()
    noise = Image.effect_noise((600, 600), 90).convert("RGB")
    buf = io.BytesIO()
    noise.save(buf, "PNG")
    (big / "frame1.png").write_bytes(buf.getvalue())
    url = f"{server.url}#vision-double"
    one_sentence(run_cli("select", str(broken), str(runs / "bright"), "--task", str(runs / "task.md"),
                         "--model", url, "--json"), "rollout.mp4", "cannot be decoded")
    one_sentence(run_cli("--image-max-mb", "0.1", "select", str(big), str(runs / "bright"), "--task",
                         str(runs / "task.md"), "--model", url, "--json"), "frame1.png", "--image-max-mb")
    one_sentence(run_cli("select", str(runs / "empty"), str(runs / "bright"), "--task", str(runs / "task.md"),
                         "--model", url, "--json"), "empty")
    assert _judged(server, before) == []


def test_a_text_only_server_is_not_asked_to_judge_frames_silently(tmp_path):
    """The text-only double takes image parts and answers 200 (as llama_cpp.server does): the frames
    still go as image parts (nothing is dropped), and models check is where it is refused."""
    runs = _pool(tmp_path)
    with VisionRecordingServer(text_only=True) as srv:
        proc = run_cli("models", "check", f"{srv.url}#vision-double", "--vision")
        one_sentence(proc, "does not see images")
        assert proc.returncode != 0
    del runs


def test_the_plan_counts_each_image_at_the_cost_models_check_measured(tmp_path, server):
    runs = _pool(tmp_path)
    store = str(tmp_path / "s.sqlite")
    args = ["select", str(runs / "dark"), str(runs / "bright"), "--task", str(runs / "task.md"),
            "--model", f"{server.url}#vision-double", "--store", store, "--dry-run", "--json"]
    guess = json.loads(run_cli(*args).stdout)
    assert any("6 image(s)" in n and "1024 prompt tokens (an estimate" in n for n in guess["notes"])
    assert run_cli("models", "check", f"{server.url}#vision-double", "--store", store, "--vision").returncode == 0
    measured = json.loads(run_cli(*args).stdout)
    assert any("each counted as 64 prompt tokens (as measured by models check)" in n for n in measured["notes"])
    # the same calls, each carrying 6 images at 64 tokens instead of 1024
    per_call = (1024 - 64) * 6
    calls = guess["model_calls_upper_bound"]
    assert guess["prompt_tokens_upper_bound"] - measured["prompt_tokens_upper_bound"] == calls * per_call


def test_frames_that_leave_no_room_for_text_are_refused_in_one_sentence():
    from types import SimpleNamespace

    from veriscale.errors import UserError
    from veriscale.selection.image_cost import ImageCost
    from veriscale.selection.prompt_fit import PromptFit

    verifier = SimpleNamespace(image_tokens=lambda: (500, True),
                               model=SimpleNamespace(context_size=lambda: 8192))
    fit = PromptFit("task", 10, 6000, 700)
    frames = [tuple(range(4))] * 3  # only the counts matter here
    cost = ImageCost.of(verifier, (), frames, fit, pairwise=True)
    assert cost.candidate_tokens == (2000, 2000, 2000) and cost.budget_tokens == (8192 - 700 - 4000) // 2
    with pytest.raises(UserError, match=r"the images take about 8,000 of the model's 8,192-token context \(500 tokens "
                                        r"each\).*\(frames\).*\(image_max_side\)"):
        ImageCost.of(verifier, (), [tuple(range(8))] * 2, fit, pairwise=True)
    assert ImageCost.of(verifier, (), [(), ()], fit, pairwise=True) is None


def test_select_over_frames_on_the_real_text_only_server_is_refused_before_any_verdict(tmp_path, llama_server):
    from tests.support.llama_server import MODEL_ID

    runs = _pool(tmp_path)
    store = tmp_path / "s.sqlite"
    args = ["select", str(runs / "dark"), str(runs / "bright"), "--task", str(runs / "task.md"),
            "--model", f"{llama_server}?retries=0#{MODEL_ID}", "--store", str(store)]
    first = one_sentence(run_cli(*args), "does not see images", "so no image was judged", "--model", "--mmproj")
    assert run_cli(*args).stderr.strip().splitlines()[-1] == first.strip().splitlines()[-1]  # the cached probe's word
    import sqlite3

    with sqlite3.connect(store) as db:  # only the probe asked the server: no judge prompt was ever sent
        asked = [r[0] for r in db.execute("SELECT request FROM calls")]
    assert asked and not any("## Criterion" in r for r in asked)


def test_compare_and_score_take_a_frame_folder_and_a_video_as_candidates(tmp_path, server):
    runs = _pool(tmp_path)
    url = f"{server.url}#vision-double"
    store = str(tmp_path / "s.sqlite")
    proc = run_cli("compare", str(runs / "task.md"), str(runs / "dark"), str(runs / "video" / "rollout.mp4"),
                   "--model", url, "--store", store, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["p_a_wins"] < 0.5 and len(out["images"]["a"]) == 3 and len(out["images"]["b"]) == 8
    assert out["read_strategies"]  # each reading says how its slot was read, as for text
    bright = json.loads(run_cli("score", str(runs / "task.md"), str(runs / "bright" / "frame1.png"), "--model", url,
                                "--store", store, "--json").stdout)
    dark = json.loads(run_cli("score", str(runs / "task.md"), str(runs / "dark"), "--model", url,
                              "--store", store, "--json").stdout)
    assert bright["reward"] > dark["reward"] and bright["images"]["candidate"][0]["label"] == "frame1.png"
