"""The images a judgement saw, in the dashboard: a ``select`` job over a pool of two frame folders runs on
the vision TEST DOUBLE (``VisionRecordingServer``: no vision model installs offline) through the real
gateway and store, so the frames land in the store; the judgement panel then shows each call's thumbnails, served by
``/api/images/<sha256>``, and a progress curve whose points carry ``frames`` draws a filmstrip that
marks the hovered point's frames. A run without images shows neither.

With ``VERISCALE_SCREENSHOT_DIR`` set, the judgement panel is saved there as ``vision-dashboard.png``
(docs/img holds the one the docs show) and the filmstrip as ``vision-filmstrip.png``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.browser import chromium, new_page
from tests.support.dashboard import dashboard
from tests.support.scripted_model import ScriptedScoreModel
from tests.support.vision_server import VisionRecordingServer
from veriscale.models.uri import load_backend

READY = "body[data-ready='1']"
DIGEST_SRC = re.compile(r"^/api/images/[0-9a-f]{64}$")
#: two rollouts of "stack the cubes": (x, y, colour) of each cube in each frame
ROLLOUTS = {
    "rollout-stacked": [[(20, 84, "#d94848"), (70, 84, "#3b82f6"), (120, 84, "#22a35a")],
                        [(45, 84, "#d94848"), (45, 52, "#3b82f6"), (120, 84, "#22a35a")],
                        [(45, 84, "#d94848"), (45, 52, "#3b82f6"), (45, 20, "#22a35a")]],
    "rollout-toppled": [[(20, 84, "#d94848"), (70, 84, "#3b82f6"), (120, 84, "#22a35a")],
                        [(45, 84, "#d94848"), (45, 52, "#3b82f6"), (120, 84, "#22a35a")],
                        [(45, 84, "#d94848"), (95, 84, "#3b82f6"), (125, 84, "#22a35a")]],
}


def _frame(cubes: list[tuple[int, int, str]], path: Path, caption: str) -> None:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (176, 132), "#f4f1ea")
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 116, 176, 132), fill="#9c8f7a")  # the table
    for x, y, colour in cubes:
        draw.rectangle((x, y, x + 30, y + 30), fill=colour, outline="#222222", width=2)
    draw.text((6, 4), caption, fill="#333333")
    img.save(path)


def _pool(root: Path) -> Path:
    pool = root / "pool"
    for name, frames in ROLLOUTS.items():
        folder = pool / name
        folder.mkdir(parents=True)
        for k, cubes in enumerate(frames, start=1):
            _frame(cubes, folder / f"frame{k}.png", f"{name.split('-')[1]} t={k}")
    (pool / "task.md").write_text("Stack the three cubes into one tower, red at the bottom.")
    return pool


def _open(page, url: str) -> None:
    page.evaluate("document.body && (document.body.dataset.ready = '0')")
    page.goto(url)
    page.wait_for_selector(READY)


def _loaded(images) -> list[int]:
    """naturalWidth of each img, once every one has finished loading."""
    images.first.wait_for()
    images.evaluate_all("els => Promise.all(els.map(e => e.complete ? 0 : new Promise(r => { e.onload = e.onerror = r; })))")
    return images.evaluate_all("els => els.map(e => e.naturalWidth)")


@pytest.fixture()
def page():
    with chromium() as browser, new_page(browser, viewport={"width": 1280, "height": 900}) as p:
        p.set_default_timeout(20_000)
        expect.set_options(timeout=20_000)
        yield p
        assert not p.errors, f"the page logged errors: {p.errors}"


def test_a_judgements_images_show_as_thumbnails_and_a_curves_frames_as_a_filmstrip(tmp_path: Path, page) -> None:
    shots = os.environ.get("VERISCALE_SCREENSHOT_DIR")
    pool = _pool(tmp_path)
    with VisionRecordingServer() as srv, \
            dashboard(tmp_path / "s.sqlite3", load_backend(f"{srv.url}#vision-double"), roots=(tmp_path,)) as d:
        done = d.wait(d.submit("select", {"paths": [str(pool)], "criteria": "general"})["id"], 60)
        assert done["status"] == "done", done
        with d.client() as c:
            sel = c.get(f"/api/runs/{done['run_id']}/selection").json()
            call = c.get(f"/api/calls/{sel['judgements'][0]['calls'][0]}").json()
        assert len(call["images"]) == 6 and all(i["kept"] for i in call["images"])  # 3 frames of each rollout

        # the judgement panel: each call's images under its label distribution, labelled, loaded from the store
        _open(page, f"{d.url}/#/runs/{done['run_id']}")
        page.get_by_test_id("heatmap-cell").first.click()
        page.wait_for_selector(READY)
        detail = page.get_by_test_id("call-detail").first
        expect(detail.get_by_test_id("label-dist")).to_be_visible()
        thumbs = detail.get_by_test_id("call-images").get_by_test_id("thumb")
        expect(thumbs).to_have_count(6)
        images = detail.get_by_test_id("thumb-img")
        srcs = [img.get_attribute("src") for img in images.all()]
        assert all(DIGEST_SRC.match(s) for s in srcs), srcs
        key = detail.get_attribute("data-key")
        with d.client() as c:
            sent = [i["sha256"] for i in c.get(f"/api/calls/{key}").json()["images"]]
        assert srcs == [f"/api/images/{s}" for s in sent]  # in the order the prompt holds them
        assert all(w > 0 for w in _loaded(images)), "every thumbnail loads"
        names = ["frame1.png", "frame2.png", "frame3.png"]  # each run's frames, named by the section they sit in
        assert thumbs.locator("figcaption").all_text_contents() == (
            [f"First response: {n}" for n in names] + [f"Second response: {n}" for n in names])
        if shots:  # the panel from its head to the first call's thumbnails (its prompt below is long)
            panel = page.get_by_test_id("judgement-panel")
            panel.scroll_into_view_if_needed()
            top, bottom = panel.bounding_box(), detail.locator(".call-dist").bounding_box()
            page.screenshot(path=str(Path(shots) / "vision-dashboard.png"), full_page=True,
                            clip={"x": top["x"], "y": top["y"] + page.evaluate("window.scrollY"), "width": top["width"],
                                  "height": bottom["y"] + bottom["height"] + 12 - top["y"]})

        # a progress curve whose points carry frames (shown() records of kept images): a filmstrip
        frames = [{"label": i["label"], "source": "", "width": i["width"], "height": i["height"],
                   "sha256": i["sha256"]} for i in call["images"][:3]]
        points = [{"step": k + 1, "value": v, "label_probs": {}, "label_mass": 0.9, "frames": frames[:k + 1]}
                  for k, v in enumerate((0.2, 0.55, 0.9))]
        curve = {"trajectory": "rollout-stacked", "points": points, "events": [], "voc": 0.7, "n_steps": 3}
        track = d.store.start_run("track", "scripted:test-double", {})
        d.store.finish_run(track, "ok", {"curves": [curve, {**curve, "trajectory": "text-only",
                                                            "points": [{"step": 1, "value": 0.5}]}]})
        _open(page, f"{d.url}/#/runs/{track}")
        strip = page.locator("[data-testid=filmstrip][data-trajectory=rollout-stacked]")
        expect(strip.get_by_test_id("frame-group")).to_have_count(3)
        expect(strip.get_by_test_id("frame")).to_have_count(6)
        assert all(w > 0 for w in _loaded(strip.get_by_test_id("thumb-img")))
        expect(strip.locator(".frame-group.current")).to_have_attribute("data-step", "3")  # the last, at first
        page.locator("[data-testid=curve][data-trajectory=rollout-stacked] [data-testid=curve-point][data-step='2']"
                     ).hover(force=True)
        expect(strip.locator(".frame-group.current")).to_have_attribute("data-step", "2")
        expect(strip.locator(".frame-group.current").get_by_test_id("frame")).to_have_count(2)
        expect(page.locator("[data-testid=curve][data-trajectory=rollout-stacked] .point.current")
               ).to_have_attribute("data-step", "2")
        expect(page.locator("[data-testid=filmstrip][data-trajectory=text-only]")).to_be_hidden()  # no frames: none
        if shots:
            page.locator(".curve-card").first.screenshot(path=str(Path(shots) / "vision-filmstrip.png"))


def test_a_run_without_images_shows_no_thumbnails(tmp_path: Path, page) -> None:
    pool = tmp_path / "pool"
    pool.mkdir()
    (pool / "task.md").write_text("Sum a list.")
    (pool / "a.md").write_text("return 0")
    (pool / "b.md").write_text("GOOD return sum(xs)")
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel(), roots=(tmp_path,)) as d:
        done = d.wait(d.submit("select", {"paths": [str(pool / n) for n in ("task.md", "a.md", "b.md")]})["id"], 60)
        _open(page, f"{d.url}/#/runs/{done['run_id']}")
        page.get_by_test_id("heatmap-cell").first.click()
        page.wait_for_selector(READY)
        expect(page.get_by_test_id("call-detail").first.get_by_test_id("label-dist")).to_be_visible()
        expect(page.get_by_test_id("call-images")).to_have_count(0)
        expect(page.get_by_test_id("thumb")).to_have_count(0)
