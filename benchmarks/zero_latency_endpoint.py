"""A zero-latency OpenAI-compatible endpoint: a **benchmark double**, not a model.

It answers at once, on 127.0.0.1, in its own process (so it never shares a benchmark driver's
GIL), the routes veriscale's HTTP backend (``veriscale.models.openai_compat``) uses:

* ``GET /v1/models``: one model id (``bench-judge``);
* ``POST /v1/chat/completions``: one token with logprobs in llama.cpp's shape
  (``choices[0].logprobs.content[0].top_logprobs[] = {token, logprob}``), the reply's ``model``
  the one asked for, and ``usage``. The grade is deterministic from the prompt: a CRC of the
  messages seeds a peaked distribution over the letters A..T (the ``letters`` scale), so the same
  request always gets the same logprobs, and different candidates get different grades. A
  prefilled assistant turn ending in "... is Pa" is continued with "ris" (the read probe's question:
  the double continues a prefilled turn, as llama-server does);
* everything else (``/props``, ``/tokenize``, ``/extras/tokenize``, ``/v1/completions``, ...) is a
  404, so the probe settles on the plain top-k read; grammar / structured-output fields are
  ignored (the double holds no reply to a format, so joint scoring is not offered);
* ``GET /bench/stats``: requests answered so far, by path (for the benchmark's own bookkeeping).

    procs, urls = start_endpoints(3)      # ['http://127.0.0.1:PORT/v1', ...]
    ...
    stop_endpoints(procs)

The HTTP parsing is a minimal keep-alive HTTP/1.1 over an ``asyncio.Protocol`` (Content-Length
bodies only, which is what httpx sends), so the endpoint's own cost per call stays small.
"""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing
import random
import socket
import time
import zlib
from typing import Any

import httpx

MODEL_ID = "bench-judge"
LETTERS = tuple(chr(ord("A") + i) for i in range(20))  # the `letters` scale, G = 20
MODELS = json.dumps({"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "veriscale-bench"}]}).encode()
NOT_FOUND = json.dumps({"error": {"message": "not found", "type": "not_found_error", "code": 404}}).encode()


def _grade(seed: int) -> list[tuple[str, float]]:
    """A deterministic, peaked distribution over A..T (and a little off-scale mass), best first."""
    rng = random.Random(seed)
    peak = rng.randrange(len(LETTERS))
    spread = 0.6 + rng.random() * 1.4
    logits = {lab: -spread * abs(i - peak) + rng.gauss(0.0, 0.3) for i, lab in enumerate(LETTERS)}
    logits[" "] = -6.0
    logits["The"] = -5.0
    top = max(logits.values())
    norm = top + math.log(sum(math.exp(v - top) for v in logits.values()))
    return sorted(((t, v - norm) for t, v in logits.items()), key=lambda tv: -tv[1])


def chat_reply(body: dict[str, Any]) -> dict[str, Any]:
    """The reply to one ``/v1/chat/completions`` body (module docstring)."""
    messages = body.get("messages") or []
    text = "\n".join(str(m.get("content") or "") for m in messages if isinstance(m, dict))
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    if last.get("role") == "assistant" and str(last.get("content") or "").endswith(" is Pa"):
        top = [("ris", -0.01), ("ra", -5.0), ("ny", -6.0), ("A", -8.0), (" ", -9.0)]
    else:
        top = _grade(zlib.crc32(text.encode("utf-8", "replace")))
    token, logprob = top[0]
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": token},
                              "finish_reason": "length"}
    if body.get("logprobs"):
        width = max(0, min(int(body.get("top_logprobs") or 0), 20))  # llama.cpp shows at most what it has
        choice["logprobs"] = {"content": [{"token": token, "logprob": logprob, "bytes": list(token.encode()),
                                           "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())}
                                                            for t, lp in top[:width]]}]}
    prompt_tokens = max(1, len(text) // 4)
    return {"id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": body.get("model") or MODEL_ID,
            "choices": [choice],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1}}


class _Endpoint(asyncio.Protocol):
    stats: dict[str, int] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, rest = self.buffer.split(b"\r\n\r\n", 1)
            length = 0
            lines = head.split(b"\r\n")
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(rest) < length:
                return
            body, self.buffer = rest[:length], rest[length:]
            method, path = (lines[0].split(b" ") + [b"", b""])[:2]
            self._answer(method.decode(), path.decode().split("?", 1)[0], body)

    def _answer(self, method: str, path: str, raw: bytes) -> None:
        key = f"{method} {path}"
        self.stats[key] = self.stats.get(key, 0) + 1
        status, out = 404, NOT_FOUND
        if method == "GET" and path == "/v1/models":
            status, out = 200, MODELS
        elif method == "GET" and path == "/bench/stats":
            status, out = 200, json.dumps(self.stats).encode()
        elif method == "POST" and path == "/v1/chat/completions":
            try:
                status, out = 200, json.dumps(chat_reply(json.loads(raw))).encode()
            except (ValueError, TypeError, AttributeError) as exc:
                status, out = 400, json.dumps({"error": {"message": f"bad request: {exc}"}}).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
        self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (status, reason.encode(), len(out), out))


def serve(port: int) -> None:
    """Serve on 127.0.0.1:``port`` until killed (a process target)."""
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(loop.create_server(_Endpoint, "127.0.0.1", port, backlog=2048))
    loop.run_until_complete(server.serve_forever())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_endpoints(n: int) -> tuple[list[multiprocessing.Process], list[str]]:
    """``n`` endpoints, each its own process; returns the processes and their ``/v1`` URLs once all answer."""
    procs, urls = [], []
    for _ in range(n):
        port = free_port()
        proc = multiprocessing.get_context("spawn").Process(target=serve, args=(port,), daemon=True)
        proc.start()
        procs.append(proc)
        urls.append(f"http://127.0.0.1:{port}/v1")
    for url in urls:
        for _ in range(400):
            try:
                if httpx.get(url + "/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        else:
            raise RuntimeError(f"the benchmark endpoint at {url} did not start")
    return procs, urls


def stats(url: str) -> dict[str, int]:
    """Requests an endpoint answered so far, by ``METHOD path``."""
    return httpx.get(url.removesuffix("/v1") + "/bench/stats", timeout=5).json()


def stop_endpoints(procs: list[multiprocessing.Process]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.join(5)
