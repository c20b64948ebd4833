"""GET /api/images/{sha256}: the bytes of an image a recorded call sent, by their digest, behind the
same token as every /api route; an unknown digest is a 404 and one that is not 64 hex digits a 422,
each one sentence. A call's view lists the images its request sent, with their labels and urls."""

from __future__ import annotations

import io
from pathlib import Path

import httpx

from tests.support.dashboard import dashboard
from tests.support.scripted_model import ScriptedScoreModel
from veriscale.data.images import ImageRef, load_image
from veriscale.server.dashboard_data import request_images

TOKEN = "image-test-token-1234567890"


def _part(colour: tuple[int, int, int], label: str):
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (12, 9), colour).save(out, "PNG")
    return load_image(ImageRef(data=out.getvalue(), label=label))


def test_a_kept_image_is_served_by_its_digest_behind_the_token(tmp_path: Path) -> None:
    red = _part((255, 0, 0), "frame 1")
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel(), token=TOKEN) as d:
        d.store.submit(d.store.put_images, [red], "k1").result()
        with d.client() as c:
            r = c.get(f"/api/images/{red.sha256}")
            assert r.status_code == 200 and r.content == red.data
            assert r.headers["content-type"] == "image/png"
            assert "immutable" in r.headers["cache-control"]
            assert r.headers["x-content-type-options"] == "nosniff"
            assert c.get(f"/api/images/{red.sha256.upper()}").content == red.data

            unknown = c.get(f"/api/images/{'0' * 64}")
            assert unknown.status_code == 404
            assert unknown.json()["error"].startswith("there is no image 0000000000000000")
            for bad in ("abc", "g" * 64, "0" * 65, "..%2F..%2Fetc"):
                refused = c.get(f"/api/images/{bad}")
                assert refused.status_code in (404, 422), (bad, refused.status_code)
                assert "error" in refused.json() and red.data not in refused.content
            bad = c.get(f"/api/images/{'z' * 64}")
            assert bad.status_code == 422 and "64 hex digits" in bad.json()["error"]
        no_token = httpx.get(f"{d.url}/api/images/{red.sha256}", timeout=10)
        assert no_token.status_code == 401 and red.data not in no_token.content


def test_request_images_reads_the_digests_a_stored_request_names_in_order() -> None:
    a, b = "a" * 64, "B" * 64
    request = {"messages": [{"role": "system", "content": "s"},
                            {"role": "user", "content": "x", "parts": ["## Response\n", {"sha256": a, "mime": "image/png"},
                                                                       {"sha256": b, "mime": "image/jpeg"},
                                                                       {"sha256": "not-a-digest"}, "text"]}]}
    found = request_images(request, {a: {"label": "frame 1", "width": 4, "height": 3, "kept": True}})
    assert [(f["sha256"], f["label"], f["kept"], f["url"], f["message"]) for f in found] == [
        (a, "frame 1", True, f"/api/images/{a}", 1), (b.lower(), "", False, f"/api/images/{b.lower()}", 1)]
    assert request_images({"messages": [{"role": "user", "content": "plain"}]}, {}) == []
    assert request_images({}, {}) == []
