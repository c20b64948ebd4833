"""The Python API takes images too: ``veriscale.compare(..., images={"a": [...], "b": [...]})`` against
the vision TEST DOUBLE (no vision model installs offline)."""

from __future__ import annotations

import pytest

import veriscale
from veriscale.errors import UserError
from tests.support.vision_server import VisionRecordingServer, solid


def test_compare_with_images_judges_the_frames_each_run_shows(tmp_path):
    (tmp_path / "dark.png").write_bytes(solid((0, 0, 0)))
    (tmp_path / "green.png").write_bytes(solid((0, 250, 0)))
    with VisionRecordingServer() as srv:
        model = f"{srv.url}#vision-double"
        c = veriscale.compare("Paint the wall green.", "run 1", "run 2", model=model, store=tmp_path / "s.sqlite",
                              images={"a": [str(tmp_path / "dark.png")], "b": [str(tmp_path / "green.png")]})
        assert c.p_a_wins < 0.5 and c.reward_b > c.reward_a
        assert [i["label"] for i in c.images["a"]] == [str(tmp_path / "dark.png")]
        with pytest.raises(UserError, match="images names 'candidate': give images for task, a, b"):
            veriscale.compare("t", "x", "y", model=model, images={"candidate": [str(tmp_path / "dark.png")]})
