"""A real llama.cpp server with tool calling (``chatml-function-calling``), shared by the harness tests.

Started once per test process (one per context size) and stopped at exit::

    url = tools_server_url()              # "http://127.0.0.1:<port>/v1"; the model id is "smollm2"
    url = tools_server_url(n_ctx=4096)    # a smaller context: bounds a runaway tool call

llama-cpp-python's ``chatml-function-calling`` writes a tool call's arguments with
``max_tokens=None``: the request's max_tokens does not bound them, only the context does (an
argument string the small model never closes runs on until the context is full, and the server
answers one request at a time, so every later request waits behind it).
"""

from __future__ import annotations

import atexit
import threading

from tests.support.llama_server import MODEL_ID, start_llama_server, stop_llama_server

__all__ = ["MODEL_ID", "tools_server_url"]
_lock = threading.Lock()
_urls: dict[int, str] = {}


def tools_server_url(n_ctx: int = 8192) -> str:
    """Start the server for ``n_ctx`` on first use and return its base URL."""
    with _lock:
        if n_ctx not in _urls:
            proc, _urls[n_ctx] = start_llama_server("--chat_format", "chatml-function-calling", n_ctx=n_ctx)
            atexit.register(stop_llama_server, proc)
        return _urls[n_ctx]
