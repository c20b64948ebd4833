"""A real llama.cpp server with tool calling (``chatml-function-calling``), shared by the harness tests.

Started once per test process and stopped at exit::

    url = tools_server_url()        # "http://127.0.0.1:<port>/v1"; the model id is "smollm2"
"""

from __future__ import annotations

import atexit
import threading

from tests.support.llama_server import MODEL_ID, start_llama_server, stop_llama_server

__all__ = ["MODEL_ID", "tools_server_url"]
_lock = threading.Lock()
_url: str | None = None


def tools_server_url() -> str:
    """Start the server on first use and return its base URL."""
    global _url
    with _lock:
        if _url is None:
            proc, _url = start_llama_server("--chat_format", "chatml-function-calling")
            atexit.register(stop_llama_server, proc)
        return _url
