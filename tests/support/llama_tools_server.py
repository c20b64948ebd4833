"""A real llama.cpp server with tool calling (``chatml-function-calling``), shared by the harness tests.

Started once per test process on a free 127.0.0.1 port with the embedded SmolLM2 GGUF and stopped
at exit::

    url = tools_server_url()        # "http://127.0.0.1:<port>/v1"; the model id is "smollm2"
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import threading
import time

import httpx

MODEL_ID = "smollm2"
_lock = threading.Lock()
_url: str | None = None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tools_server_url() -> str:
    """Start the server on first use and return its base URL."""
    global _url
    with _lock:
        if _url is not None:
            return _url
        from veriscale.models.embedded import default_gguf_path

        port = _free_port()
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()),
               "--chat_format", "chatml-function-calling", "--n_ctx", "8192",
               "--n_threads", str(os.cpu_count() or 1), "--host", "127.0.0.1", "--port", str(port),
               "--model_alias", MODEL_ID]
        proc = subprocess.Popen(cmd, stdout=open(os.devnull, "w"), stderr=subprocess.STDOUT)
        atexit.register(_stop, proc)
        url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}")
            try:
                if httpx.get(url + "/models", timeout=1.0).status_code == 200:
                    _url = url
                    return url
            except httpx.HTTPError:
                time.sleep(0.25)
        proc.kill()
        raise RuntimeError("llama_cpp.server did not come up within 120 s")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
