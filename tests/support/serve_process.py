"""A real ``veriscale serve`` process for tests: a free port, and waiting until it answers.

    port = free_port()
    proc = subprocess.Popen([... "veriscale", "serve", "--port", str(port)], ...)
    wait_up(f"http://127.0.0.1:{port}", proc, log)
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, log: Path, seconds: float = 120, health: str = "/api/health") -> None:
    """Return once ``url``'s health route answers (``serve-reward``'s is ``/health``); fail with the
    server's log if it dies or never does."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(url + health).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise AssertionError(f"the server did not come up: {log.read_text()}")
