"""The real ``veriscale serve`` app on 127.0.0.1 for tests and benchmarks, over a given store.

    with dashboard(tmp_path / "store.sqlite3", ScriptedScoreModel(), roots=(EXAMPLES,)) as d:
        job = d.submit("select", {"paths": [str(POOL)]})
        d.wait(job["id"])                       # the finished job
        httpx.get(d.url + "/api/runs").json()
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.served_app import served
from veriscale.engine.store import Store
from veriscale.server.app import create_app
from veriscale.server.jobs import JobRunner
from veriscale.server.security import AccessPolicy

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
TERMINAL_BENCH_POOL = EXAMPLES / "terminal_bench" / "merge-diff-arc-agi-task.jsonl"


@dataclass
class Dashboard:
    url: str
    store: Store
    runner: JobRunner
    token: str | None = None

    def client(self, **kwargs: Any) -> httpx.Client:
        headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)

    def submit(self, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        with self.client() as c:
            r = c.post("/api/jobs", json={"kind": kind, "params": params})
        assert r.status_code == 201, r.text
        return r.json()

    def wait(self, job_id: int, seconds: float = 300) -> dict[str, Any]:
        deadline = time.monotonic() + seconds
        with self.client() as c:
            while time.monotonic() < deadline:
                job = c.get(f"/api/jobs/{job_id}").json()
                if job["status"] not in ("queued", "running"):
                    return job
                time.sleep(0.1)
        raise AssertionError(f"job {job_id} did not finish in {seconds} s: {job}")


@contextmanager
def dashboard(store_path: Path, model: Any, *, roots: tuple[Path, ...] = (), token: str | None = None,
              workers: int = 1, prices: Any = None) -> Iterator[Dashboard]:
    store = Store.open(store_path)
    runner = JobRunner(store, model, roots=roots, workers=workers)

    def app_for(port: int):
        return create_app(store, runner, AccessPolicy.for_bind("127.0.0.1", port, token=token), roots=roots,
                          prices=prices)

    runner.start()
    try:
        with served(app_for, health="/api/health") as url:
            yield Dashboard(url, store, runner, token)
    finally:
        runner.stop()
