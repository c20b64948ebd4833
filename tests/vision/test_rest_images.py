"""The REST API's score and compare jobs take images (data URLs, or files under an allowed folder)
and give the verdict the CLI gives; the vision server is the TEST DOUBLE ``VisionRecordingServer``."""

from __future__ import annotations

import base64

from tests.support.dashboard import dashboard
from tests.support.vision_server import VisionRecordingServer, solid
from veriscale.models.uri import load_backend


def _url(rgb: tuple[int, int, int]) -> str:
    return "data:image/png;base64," + base64.b64encode(solid(rgb)).decode()


def test_compare_and_score_jobs_judge_the_images_they_are_given(tmp_path):
    shots = tmp_path / "shots"
    shots.mkdir()
    (shots / "green.png").write_bytes(solid((0, 250, 0)))
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(solid((0, 250, 0)))
    with VisionRecordingServer() as srv, \
            dashboard(tmp_path / "s.sqlite3", load_backend(f"{srv.url}#vision-double"), roots=(shots,)) as d, \
            d.client() as c:
        cmp = d.wait(d.submit("compare", {"task": "Paint it green.", "a": "run a", "b": "run b", "images": {
            "a": [_url((0, 0, 0))], "b": [str(shots / "green.png")]}})["id"])
        assert cmp["status"] == "done", cmp
        result = c.get(f"/api/jobs/{cmp['id']}/result").json()["result"]
        assert result["p_a_wins"] < 0.5 and result["images"]["b"][0]["label"] == str(shots / "green.png")
        dark = d.wait(d.submit("score", {"task": "Paint it green.", "candidate": "run", "images": {
            "candidate": [_url((0, 0, 0))]}})["id"])
        green = d.wait(d.submit("score", {"task": "Paint it green.", "candidate": "run", "images": {
            "candidate": [_url((0, 250, 0))]}})["id"])
        rewards = [c.get(f"/api/jobs/{j['id']}/result").json()["result"]["reward"] for j in (dark, green)]
        assert rewards[0] < rewards[1]
        refused = d.wait(d.submit("score", {"task": "t", "candidate": "c", "images": {"candidate": [str(outside)]}})["id"])
        assert refused["status"] == "failed" and "elsewhere.png" in refused["error"], refused
        bad = c.post("/api/jobs", json={"kind": "score", "params": {"task": "t", "candidate": "c",
                                                                     "images": {"frames": [_url((1, 1, 1))]}}})
        assert bad.status_code == 422
