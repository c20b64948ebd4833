"""Progress tracking through a real ``python -m llama_cpp.server``: the same curve as in process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from veriscale.data.importers import load_candidates
from veriscale.models.uri import load_backend
from veriscale.progress import ProgressJudge, ProgressTracker, track

pytestmark = pytest.mark.server
RUN = Path(__file__).resolve().parents[2] / "examples" / "progress" / "success_trajectory.json"


def test_server_curve_matches_the_embedded_curve_and_the_async_tracker(llama_server, embedded_model):
    run = load_candidates([str(RUN)])[0]
    server = load_backend(llama_server + "?template=chatml#smollm2")
    over_http = track(None, run, [1, 2, 3, 4], judge=ProgressJudge(server, step_tokens=120))
    in_process = track(None, run, [1, 2, 3, 4], judge=ProgressJudge(embedded_model, step_tokens=120))
    assert not over_http.failed and not in_process.failed
    for a, b in zip(over_http.points, in_process.points):
        assert a.label_mass > 0.05 and abs(a.value - b.value) < 0.1, (a, b)  # the same slot, read over HTTP

    tracker = ProgressTracker(run.task, judge=ProgressJudge(server, step_tokens=120))

    async def follow() -> list:
        return [await tracker.aupdate(step) for step in run.trajectory.steps[:4]]

    live = asyncio.run(follow())
    # online = offline, up to the server's own float noise: llama_cpp.server reuses the cached prefix of its
    # last prompt, and the whitespace-path reads between calls change which prefix that is (about 1e-4)
    assert [p.value for p in live] == pytest.approx(over_http.values(), abs=1e-3)
