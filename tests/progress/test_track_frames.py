"""Progress over images and video frames: causal prompts with frames, the prefix layout, frame-only
runs, what each point records, elision with frames, and the online tracker with image steps.

The model is a TEST DOUBLE (:class:`GreenFrameModel`, below): it records every request and grades
progress by the green channel of the last image the prompt shows, so a run whose frames turn green
must give a rising curve.
"""

from __future__ import annotations

import base64
import io
import json

import pytest

from tests.support.scripted_progress import ScriptedProgressModel
from veriscale.data.images import ImagePart, ImageRef
from veriscale.data.model import Candidate, Step, Task, Trajectory
from veriscale.errors import UserError
from veriscale.models.base import ScoreRequest, ScoreResponse
from veriscale.progress import ProgressJudge, ProgressTracker, track
from veriscale.progress.frame_steps import frame_steps
from veriscale.progress.steps import IMAGE_TOKENS
from veriscale.progress.step_records import RecordError, step_from_record


def png(green: int, size: int = 8) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (size, size), (40, green, 40)).save(out, "PNG")
    return out.getvalue()


def green_of(part: ImagePart) -> int:
    from PIL import Image

    with Image.open(io.BytesIO(part.data)) as img:
        return int(img.convert("RGB").getpixel((0, 0))[1])


class GreenFrameModel(ScriptedProgressModel):
    """TEST DOUBLE: records each request; progress = green channel of the prompt's last image / 255
    (no image: 0), all probability on the nearest label."""

    uri = "scripted:green-frames-double"
    display_name = "green-frame test double"

    def score(self, request: ScoreRequest) -> ScoreResponse:
        self.calls.append(request)
        images = request.messages[-1].images()
        value = green_of(images[-1]) / 255 if images else 0.0
        labels = request.labels
        nearest = min(labels, key=lambda lab: abs((1.0 - labels.index(lab) / (len(labels) - 1)) - value))
        return ScoreResponse(label_probs={lab: float(lab == nearest) for lab in labels}, label_mass=0.9,
                             prompt_tokens=10, prompt_tokens_total=10)


GREENS = [0, 60, 120, 180, 255]


def frames(greens: list[int] = GREENS) -> list[ImageRef]:
    return [ImageRef(data=png(g), label=f"frame {i} at {0.5 * (i - 1):.2f} s", at_s=0.5 * (i - 1))
            for i, g in enumerate(greens, 1)]


def video_candidate(greens: list[int] = GREENS) -> Candidate:
    return Candidate(id="clip", text="video clip.mp4", images=frames(greens), task=Task("Turn the light green"),
                     metadata={"video": {"frames": len(greens)}})


def labels_of(req: ScoreRequest) -> list[str]:
    return [img.label for img in req.messages[-1].images()]


def test_a_frame_only_run_is_tracked_one_point_per_frame_and_each_checkpoint_sees_frames_1_to_t() -> None:
    model = GreenFrameModel()
    curve = track(None, video_candidate(), judge=ProgressJudge(model))
    assert curve.steps() == [1, 2, 3, 4, 5] and curve.n_steps == 5
    names = [f"frame {i} at {0.5 * (i - 1):.2f} s" for i in range(1, 6)]
    for t, req in enumerate(model.calls, 1):
        assert labels_of(req) == names[:t], f"checkpoint {t} saw {labels_of(req)}"
    values = curve.values()
    assert all(v is not None for v in values)
    assert values == sorted(values) and values[0] < values[-1]  # greener frames: more progress
    assert curve.voc == pytest.approx(1.0)


def test_each_prompt_extends_the_previous_ones_parts() -> None:
    model = GreenFrameModel()
    track(None, video_candidate(), judge=ProgressJudge(model))

    def parts(req: ScoreRequest) -> list:
        return [p if isinstance(p, str) else p.key() for p in req.messages[-1].parts]

    for t, (before, after) in enumerate(zip(model.calls, model.calls[1:]), 1):
        a, b = parts(before), parts(after)
        assert a[-1].startswith("\n\n## Question")  # checkpoint t: ... step t's frame, then the question
        assert b[:len(a) - 1] == a[:-1], f"checkpoint {t + 1} does not extend checkpoint {t}"
        assert b[len(a) - 1].startswith("\n\n<<<") and f"[step {t + 1}]" in b[len(a) - 1]
        assert before.messages[0] == after.messages[0] and before.prefill == after.prefill


def test_frames_sit_right_after_their_step_block_and_task_images_after_the_task() -> None:
    model = GreenFrameModel()
    goal = ImageRef(data=png(255), label="goal picture")
    steps = [Step(role="agent", text="I look at the lamp", images=[frames()[0]]),
             Step(role="agent", text="I press the switch"),
             Step(role="environment", images=[frames()[3]])]  # frames only, no text
    curve = track(Task("Turn the light green", images=[goal]), steps, judge=ProgressJudge(model))
    assert len(curve.points) == 3
    msg = model.calls[-1].messages[-1]
    kinds = ["img" if isinstance(p, ImagePart) else p for p in msg.parts]
    first_img = kinds.index("img")
    assert "## Task" in kinds[first_img - 1] and "## Steps so far" not in kinds[first_img - 1]
    assert "goal picture" in kinds[first_img - 1]
    step1 = kinds[first_img + 1]
    assert "## Steps so far" in step1 and "I look at the lamp" in step1 and step1.rstrip().endswith(":")
    assert "END STEP" in step1.split("(image 1)")[0]  # the image follows the fenced block
    assert [p.label for p in msg.images()] == ["goal picture", "frame 1 at 0.00 s", "frame 4 at 1.50 s"]
    assert "[step 3] environment" in msg.content
    assert [f["label"] for f in curve.points[0].frames] == ["goal picture", "frame 1 at 0.00 s"]
    assert [f["step"] for f in curve.points[-1].frames] == ["task", 1, 3]


def test_points_record_the_frames_they_saw_without_bytes() -> None:
    curve = track(None, video_candidate(), judge=ProgressJudge(GreenFrameModel()))
    for t, point in enumerate(curve.points, 1):
        assert [f["step"] for f in point.frames] == list(range(1, t + 1))
        last = point.frames[-1]
        assert last["label"] == f"frame {t} at {0.5 * (t - 1):.2f} s" and len(last["sha256"]) == 64
        assert last["width"] == 8 and last["at_s"] == pytest.approx(0.5 * (t - 1))
    doc = curve.to_dict()
    json.dumps(doc)  # JSON-safe: no bytes
    assert all("frames" in p for p in doc["points"])


def test_a_text_trajectory_keeps_its_requests_and_json_shape() -> None:
    steps = [Step(role="agent", text=t, observation="ok") for t in ("UP", "look", "UP UP")]
    model = ScriptedProgressModel()
    curve = track("Do the thing", steps, judge=ProgressJudge(model))
    for req in model.calls:
        assert req.messages[-1].parts == () and "## Steps so far\n\n<<<" in req.messages[-1].content
        assert "parts" not in req.to_dict()["messages"][-1]
    assert all("frames" not in p for p in curve.to_dict()["points"])
    assert curve.values() == [0.25, 0.25, 0.75]


def test_elided_steps_take_their_frames_and_the_marker_says_so() -> None:
    model = GreenFrameModel()
    cand = video_candidate([10 * i for i in range(1, 21)])
    judge = ProgressJudge(model, budget_tokens=6 * IMAGE_TOKENS, step_tokens=60)
    curve = track(None, cand, judge=judge)
    assert curve.rerenders >= 1
    last = model.calls[-1].messages[-1]
    assert "elided" in last.content and "with their" in last.content and "images ...]" in last.content
    shown = [p.label for p in last.images()]
    assert shown[0] == "frame 1 at 0.00 s" and shown[-1] == "frame 20 at 9.50 s"
    assert len(shown) < 20
    assert [f["label"] for f in curve.points[-1].frames] == shown  # the record matches what was shown
    # causal even after elision: checkpoint t's newest frame is frame t
    assert [labels_of(r)[-1] for r in model.calls] == [f"frame {i} at {0.5 * (i - 1):.2f} s" for i in range(1, 21)]


def test_frame_steps_use_the_frame_label_or_its_number_and_time() -> None:
    steps = frame_steps([ImageRef(data=b"x", label="cam 1"), ImageRef(data=b"y", at_s=1.2)])
    assert [s.text for s in steps] == ["cam 1", "frame 2 at 1.20 s"]
    assert all(len(s.images) == 1 for s in steps)


def test_a_run_with_steps_keeps_its_steps_and_notes_images_tied_to_no_step() -> None:
    cand = Candidate(id="r", trajectory=Trajectory([Step(role="agent", text="UP")]), images=frames()[:2],
                     task=Task("Do it"))
    curve = track(None, cand, judge=ProgressJudge(ScriptedProgressModel()))
    assert curve.steps() == [1] and any("belong to no step" in n for n in curve.notes)


def test_a_run_with_neither_steps_nor_frames_is_refused() -> None:
    with pytest.raises(UserError, match="steps or its frames"):
        track("t", Candidate(id="r", text="just an answer"), judge=ProgressJudge(ScriptedProgressModel()))


def test_the_online_tracker_takes_image_steps_and_keeps_the_causal_rule(tmp_path) -> None:
    model = GreenFrameModel()
    tracker = ProgressTracker("Turn the light green", judge=ProgressJudge(model))
    path = tmp_path / "cam-2.png"
    path.write_bytes(png(120))
    black_url = "data:image/png;base64," + base64.b64encode(png(0)).decode()
    data_url = "data:image/png;base64," + base64.b64encode(png(255)).decode()
    p1 = tracker.update({"role": "environment", "images": [black_url]})
    p2 = tracker.update({"role": "agent", "text": "I flip the switch", "images": [{"source": str(path), "label": "cam 2"}]})
    p3 = tracker.update(Step(role="environment", images=[ImageRef(source=data_url, label="cam 3")]))
    assert [labels_of(r) for r in model.calls] == [["image 1"], ["image 1", "cam 2"], ["image 1", "cam 2", "cam 3"]]
    assert p1.value < p2.value < p3.value
    assert [f["label"] for f in p3.frames] == ["image 1", "cam 2", "cam 3"]
    assert tracker.curve.steps() == [1, 2, 3]


def test_step_records_parse_images_and_name_what_is_wrong() -> None:
    step = step_from_record({"role": "environment", "images": ["a.png", {"source": "b.png", "label": "wrist", "at_s": 2}]})
    assert step.text == "" and [(r.source, r.label, r.at_s) for r in step.images] == [
        ("a.png", "image 1", None), ("b.png", "wrist", 2.0)]
    for bad, words in (({"images": "a.png"}, "must be a list"), ({"images": [3]}, "image 1 must be"),
                       ({"images": [{"source": "a.png", "label": 5}]}, "label of image 1"),
                       ({"images": [{"source": "a.png", "at_s": "x"}]}, "at_s of image 1"),
                       ({"images": []}, "the step is empty")):
        with pytest.raises(RecordError, match=words):
            step_from_record(bad)


def test_an_unreadable_image_in_a_live_step_is_one_sentence_and_leaves_the_log_as_it_was(tmp_path) -> None:
    tracker = ProgressTracker("t", judge=ProgressJudge(GreenFrameModel()))
    with pytest.raises(UserError):
        tracker.update({"role": "environment", "images": [str(tmp_path / "missing.png")]})
    assert len(tracker.log) == 0
    tracker.update({"role": "agent", "text": "go on"})
    assert tracker.curve.steps() == [1]
