"""Start a real ``python -m llama_cpp.server`` on a free 127.0.0.1 port with the embedded GGUF.

    proc, url = start_llama_server("--logits_all", "true")        # url: http://127.0.0.1:P/v1
    proc, url = start_llama_server("--logits_all", "true", n_ctx=2048)   # a small context
    stop_llama_server(proc)

The model id is always ``smollm2``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx

MODEL_ID = "smollm2"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_llama_server(*extra_args: str, timeout_s: float = 120, n_ctx: int = 8192) -> tuple[subprocess.Popen, str]:
    from veriscale.models.embedded_files import default_gguf_path

    port = _free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()), "--n_ctx", str(n_ctx),
           "--n_threads", str(os.cpu_count() or 1), "--host", "127.0.0.1", "--port", str(port),
           "--model_alias", MODEL_ID, *extra_args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/models", timeout=1.0).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.25)
    proc.kill()
    raise RuntimeError(f"llama_cpp.server did not come up within {timeout_s:.0f} s")


def stop_llama_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
