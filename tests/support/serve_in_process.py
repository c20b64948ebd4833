"""``veriscale serve`` run in process (typer's CliRunner) for as long as one test's requests take.

``uvicorn.run`` is replaced, for the test, by a real uvicorn server in a thread that serves until
``during(url)`` returns; the command then ends as it would on Ctrl-C::

    answer = serve_while(monkeypatch, ["--injection-policy", "exclude"],
                         ["--model", "scripted", "--allow-dir", str(pool)],
                         lambda url: httpx.get(url + "/api/info").json())
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import httpx
import pytest
import uvicorn
from typer.testing import CliRunner

from tests.support.serve_process import free_port


def serve_while(monkeypatch: pytest.MonkeyPatch, front: list[str], serve_args: list[str],
                during: Callable[[str], Any], seconds: float = 120) -> Any:
    """Run ``veriscale FRONT serve --port P SERVE_ARGS``; what ``during(url)`` returned while it served."""
    from veriscale.cli import app

    got: list[Any] = []

    def serve_briefly(app_: Any, host: str, port: int, log_level: str) -> None:
        server = uvicorn.Server(uvicorn.Config(app_, host=host, port=port, log_level=log_level))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        url = f"http://{host}:{port}"
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "/api/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.05)
            got.append(during(url))
        finally:
            server.should_exit = True
            thread.join(30)

    monkeypatch.setattr(uvicorn, "run", serve_briefly)
    result = CliRunner().invoke(app, [*front, "serve", "--port", str(free_port()), *serve_args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # the test's own requests failed: their error, not the exit code
    assert result.exit_code == 0, result.output
    assert len(got) == 1, result.output
    return got[0]


def wait_job(url: str, job: dict[str, Any], seconds: float = 120) -> dict[str, Any]:
    """The job once it is no longer queued or running (polled over the REST API)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and job["status"] in ("queued", "running"):
        time.sleep(0.05)
        job = httpx.get(url + f"/api/jobs/{job['id']}").json()
    return job
