"""Serve an ASGI app with a real uvicorn server on 127.0.0.1, in a thread, for one test scope.

    with served(app) as url:
        httpx.get(url + "/health")
    with served(lambda port: make_app(port), health="/api/health") as url:   # an app that needs its port
        ...
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn


def wait_healthy(url: str, seconds: float = 60.0, health: str = "/health") -> None:
    """Return once ``GET url/health`` answers 200 (or after ``seconds``: the test then fails on its request)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + health).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)


@contextmanager
def served(app: Any, health: str = "/health") -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    if callable(app) and not hasattr(app, "router"):  # a factory of the app for its port
        app = app(port)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, health=health)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
