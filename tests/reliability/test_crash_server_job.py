"""SIGKILL of ``veriscale serve`` at seeded calls of a select job: after a restart the job resumes,
its result equals an uninterrupted job's, no finished call is paid again, no run says running.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.reliability.crash_support import PROCESS_TIMEOUT_S, cli_env, comparable, store_check
from tests.support.fault_server import FaultServer
from tests.support.serve_process import free_port, wait_up

SEEDS = range(4)
ANSWERS = {"a.md": "wc -l < notes.txt", "b.md": "cat notes.txt | wc", "c.md": "ls -la notes.txt"}


def _serve(model: str, store: Path, folder: Path, port: int, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "veriscale", "serve", "--model", model, "--store", str(store),
                             "--allow-dir", str(folder), "--port", str(port)], stdout=log.open("ab"),
                            stderr=subprocess.STDOUT, start_new_session=True, env=cli_env())


def _finished_job(url: str, job_id: str, proc: subprocess.Popen, log: Path) -> dict:
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    while (job := httpx.get(f"{url}/api/jobs/{job_id}").json())["status"] in ("queued", "running"):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return job


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(60)


def _params(folder: Path) -> dict:
    return {"paths": [str(folder / "task.md"), *(str(folder / n) for n in ANSWERS)], "method": "round_robin",
            "adaptive": False, "criteria": "general"}


def _job_result(url: str, job: dict) -> dict:
    return httpx.get(f"{url}/api/runs/{job['run_id']}").json()["result"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The job's input files, one folder for the uninterrupted job and the killed ones."""
    folder = tmp_path_factory.mktemp("inputs") / "runs"
    folder.mkdir()
    (folder / "task.md").write_text("Write a shell command that prints how many lines notes.txt has.")
    for name, text in ANSWERS.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture(scope="module")
def uninterrupted(folder, tmp_path_factory):
    root = tmp_path_factory.mktemp("fresh")
    port, log = free_port(), root / "serve.log"
    url = f"http://127.0.0.1:{port}"
    with FaultServer(varied=True) as srv:
        proc = _serve(f"{srv.url}#fault-model", root / "store.sqlite3", folder, port, log)
        try:
            wait_up(url, proc, log, PROCESS_TIMEOUT_S)
            job = httpx.post(url + "/api/jobs", json={"kind": "select", "params": _params(folder)}).json()
            done = _finished_job(url, job["id"], proc, log)
            assert done["status"] == "done", done
            return _job_result(url, done), len(srv.completion_requests())
        finally:
            _stop(proc)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_server_killed_at_a_seeded_call_resumes_the_job_to_the_same_result(seed, uninterrupted, folder, tmp_path):
    baseline, total = uninterrupted
    kill_at = random.Random("server-job").sample(range(1, total), len(SEEDS))[seed]
    store, log, port = tmp_path / "store.sqlite3", tmp_path / "serve.log", free_port()
    url = f"http://127.0.0.1:{port}"
    with FaultServer(varied=True) as srv:
        model = f"{srv.url}#fault-model"
        proc = _serve(model, store, folder, port, log)
        try:
            wait_up(url, proc, log, PROCESS_TIMEOUT_S)
            srv.kill_at(proc.pid, kill_at)
            job = httpx.post(url + "/api/jobs", json={"kind": "select", "params": _params(folder)}).json()
            assert proc.wait(PROCESS_TIMEOUT_S) == -9
        finally:
            _stop(proc)
        after_kill = store_check(store)
        assert after_kill["integrity"] == "ok"

        sent_before = len(srv.completion_requests())
        proc = _serve(model, store, folder, port, log)
        try:
            wait_up(url, proc, log, PROCESS_TIMEOUT_S)
            done = _finished_job(url, job["id"], proc, log)
            assert done["status"] == "done", done
            result = _job_result(url, done)
            runs = httpx.get(f"{url}/api/runs", params={"limit": 50}).json()
        finally:
            _stop(proc)
        sent_by_rerun = len(srv.completion_requests()) - sent_before

    assert comparable(result) == comparable(baseline)
    assert sent_by_rerun == total - after_kill["ok_calls"], "a finished call was paid again"
    listed = runs["runs"] if isinstance(runs, dict) else runs
    assert all(run["status"] != "running" for run in listed), listed
    assert store_check(store)["running"] == 0
