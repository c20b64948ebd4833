"""A small real OpenAI-style HTTP server on 127.0.0.1 for parsing and retry tests.

It answers ``/v1/completions`` in OpenAI's legacy logprob shape and ``/v1/chat/completions``
in the ``content[].top_logprobs[]`` shape. Faults are queued per test::

    with FaultServer() as srv:
        srv.queue("429", "500", "timeout", "malformed", "nologprobs", "nolabel")   # next requests
        srv.url          # http://127.0.0.1:PORT/v1
        srv.requests     # every request received, in order: {"path", "body", "headers"}
        srv.max_in_flight  # the most completion requests it was answering at once
        srv.probes       # other POSTs (tokenize probes, answered 404): {"path", "headers"}
        srv.read_probes  # the backend's read-probe questions, answered plainly outside the fault queue
        srv.hold_after(6)  # answer 6 more completion requests, hold the rest until srv.release()

What the server says about itself can be set: ``srv.model_ids`` (listed by ``/v1/models``),
``srv.model_fields`` (vLLM's ``max_model_len``, ``root``), ``srv.props`` (llama-server's
``/props``), ``srv.system_fingerprint`` (named in every reply); ``srv.unknown_fields = ("top_k",)``
refuses every request with such a field with HTTP 400, in OpenAI's words.

Unqueued requests succeed with a fixed distribution (A: 0.6, B: 0.3, 'x': 0.1), or, with
``varied=True``, with a distribution over the letters A-T drawn from a hash of the prompt (so
candidates differ and a rerun gets the same answers). Faults can also be drawn at random, and
the server can SIGKILL a client process when a given request arrives (a crash at a known point)::

    FaultServer(varied=True, fault_rate=0.2, fault_seed=3)   # 20 % of requests get a random fault
    srv.kill_at(pid, 5)                                      # SIGKILL pid when request 5 arrives

Fault kinds: 429 (with ``Retry-After: 0``), 500, reset (the connection closes unanswered),
timeout (slow past a deadline), refuse (HTTP 400 naming no field), garbage, malformed, nologprobs, nolabel (top_logprobs hold no
score label: 'x' 0.7, 'y' 0.3), cut (the body ends half-way), context, othermodel (the reply names
model 'other', not the one asked). Replies name the model the request asked for, as vLLM and
llama_cpp.server do (``srv.reply_model = "NAME"``: every reply names NAME instead). A chat upstream double answers with a
scripted message instead::

    FaultServer(chat_reply="done")                                   # this text, finish_reason "stop"
    FaultServer(chat_reply={"content": "", "tool_calls": [...]})     # a message (tool calls: "tool_calls")
    FaultServer(chat_reply={"content": "cut", "finish_reason": "length"})   # a reply cut by max_tokens
    FaultServer(chat_reply={"content": "1, 2,", "stop_reason": "3", "prompt_tokens": 7})   # vLLM's stop string, a count
    FaultServer(chat_reply=lambda body: f"answer {body['seed']}")    # either, from the request body
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_TOP = {"A": 0.6, " B": 0.3, "x": 0.1}
LETTERS = "ABCDEFGHIJKLMNOPQRST"
DIGITS = "123456789"
#: the faults ``fault_rate`` draws from
RANDOM_FAULTS = ("429", "500", "reset", "timeout", "garbage", "malformed", "nologprobs", "nolabel", "cut")


def is_read_probe(body: dict[str, Any]) -> bool:
    """Whether a request is one of the read probe's questions (kept apart from the requests under test)."""
    from veriscale.models.read_probe import CONTINUE_PREFILL, PROBE_MESSAGES

    text = json.dumps(body.get("messages") or body.get("prompt") or "")
    return PROBE_MESSAGES[0].content in text or CONTINUE_PREFILL in text


def varied_top(body: dict[str, Any]) -> dict[str, float]:
    """Two letters (A-T) and two digits (1-9), weighted by a hash of the prompt: same prompt, same
    answer, whichever of the letter or digit scales the prompt asks for."""
    digest = hashlib.sha256(json.dumps(body.get("messages") or body.get("prompt"), sort_keys=True).encode()).digest()
    picks = [LETTERS[digest[0] % 20], LETTERS[digest[1] % 20], DIGITS[digest[2] % 9], DIGITS[digest[3] % 9]]
    top: dict[str, float] = {}
    for i, label in enumerate(picks):
        top[label] = top.get(label, 0.0) + 1 + digest[4 + i]
    total = sum(top.values()) * 1.1  # 1/11 of the mass on a token that is no label
    top = {label: w / total for label, w in top.items()}
    top["zz"] = 1 - sum(top.values())
    return top


class FaultServer:
    def __init__(self, top: dict[str, float] | None = None, delay_s: float = 0.0, timeout_sleep_s: float = 3.0,
                 chat_reply: Any = None, varied: bool = False, fault_rate: float = 0.0, fault_seed: int = 0,
                 fault_kinds: tuple[str, ...] = RANDOM_FAULTS, model_ids: tuple[str, ...] = ("fault-model", "judge")) -> None:
        self.model_ids = model_ids  # what GET /v1/models lists
        self.system_fingerprint = ""  # set: every reply names these weights (as OpenAI's replies do)
        self.model_fields: dict[str, Any] = {}  # more fields of each listed model (vLLM: max_model_len, root)
        self.props: dict[str, Any] | None = None  # set: GET /props answers it (as the C++ llama-server does)
        self.reply_model: str | None = None  # set: every reply names this model (else the one asked)
        self.unknown_fields: tuple[str, ...] = ()  # body fields refused with HTTP 400, as OpenAI refuses top_k
        self.top = top or DEFAULT_TOP
        self.varied = varied
        self.fault_rate = fault_rate
        self.fault_kinds = fault_kinds
        self._rng = random.Random(fault_seed)
        self._kill: tuple[int, int] | None = None
        self.faults_sent: list[str] = []
        self.probes: list[dict[str, Any]] = []
        self.read_probes: list[dict[str, Any]] = []  # the backend's read probe (veriscale.models.read_probe)
        self.in_flight = 0
        self.max_in_flight = 0
        self.hold_from: int | None = None
        self.gate = threading.Event()
        self.chat_reply = chat_reply  # None: the logprob reply; a str, a message dict, or body -> either
        self.delay_s = delay_s
        self.timeout_sleep_s = timeout_sleep_s
        self.faults: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, payload: Any, raw: bytes | None = None, length: int | None = None,
                      headers: dict[str, str] | None = None) -> None:
                self._leave()  # before the reply goes out: the client may send its next request at once
                body = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(length if length is not None else len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                if length is not None:
                    self.close_connection = True
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": i, "object": "model", **server.model_fields}
                                                                for i in server.model_ids]})
                elif self.path == "/props" and server.props is not None:
                    self._send(200, server.props)
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/completions"):
                    with server.lock:
                        server.probes.append({"path": self.path, "headers": dict(self.headers)})
                    return self._send(404, {"error": "not found"})  # e.g. no tokenize endpoint
                if is_read_probe(body):  # the backend's one-time read probe: answered plainly, no fault spent
                    with server.lock:
                        server.read_probes.append({"path": self.path, "body": body})
                    return self._send(200, server.reply(self.path, body, probe=True))
                with server.lock:
                    server.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                    fault = server.faults.pop(0) if server.faults else "ok"
                    if fault == "ok" and server.fault_rate and server._rng.random() < server.fault_rate:
                        fault = server._rng.choice(server.fault_kinds)
                    if fault != "ok":
                        server.faults_sent.append(fault)
                    kill = server._kill
                    held = server.hold_from is not None and len(server.requests) > server.hold_from
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                self._counted = True
                try:
                    if kill is not None and len(server.requests) >= kill[1]:
                        server._kill = None
                        try:
                            os.kill(kill[0], signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                        return self._reset()
                    if held:
                        server.gate.wait(120)
                    self._answer(fault, body)
                finally:
                    self._leave()

            def _leave(self) -> None:
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server.lock:
                        server.in_flight -= 1

            def _answer(self, fault: str, body: dict[str, Any]) -> None:
                if server.delay_s:
                    time.sleep(server.delay_s)
                if fault == "429":
                    return self._send(429, {"error": {"message": "rate limited"}}, headers={"Retry-After": "0"})
                if fault == "reset":
                    return self._reset()
                if fault == "500":
                    return self._send(500, {"error": {"message": "boom"}})
                if fault == "refuse":
                    return self._send(400, {"error": {"message": "the request is invalid",
                                                      "type": "invalid_request_error"}})
                unknown = [name for name in server.unknown_fields if name in body]
                if unknown:  # OpenAI's words for a field it does not take
                    return self._send(400, {"error": {"message": f"Unrecognized request argument supplied: {unknown[0]}",
                                                      "type": "invalid_request_error"}})
                if fault == "timeout":
                    time.sleep(server.timeout_sleep_s)
                    return self._send(200, server.reply(self.path, body, probe=True))
                if fault == "garbage":
                    return self._send(200, None, raw=b"<html>not json")
                if fault == "context":
                    return self._send(400, {"error": {"message": "Requested tokens exceed context window of 8192"}})
                payload = server.reply(self.path, body, top={"x": 0.7, "y": 0.3} if fault == "nolabel" else None)
                if server.system_fingerprint:
                    payload["system_fingerprint"] = server.system_fingerprint
                if fault == "malformed":
                    lp = payload["choices"][0]["logprobs"]
                    if "content" in lp:
                        lp["content"][0]["top_logprobs"] = [{"token": "A", "logprob": "high"}]
                    else:
                        lp["top_logprobs"] = ["not-a-dict"]
                if fault == "nologprobs":
                    payload["choices"][0].pop("logprobs")
                if fault == "othermodel":
                    payload["model"] = "other"
                if fault == "cut":
                    whole = json.dumps(payload).encode()
                    return self._send(200, None, raw=whole[: len(whole) // 2], length=len(whole))
                self._send(200, payload)

            def _reset(self) -> None:
                """Close the connection without an answer (the client sees a reset or an empty reply)."""
                self.close_connection = True
                try:
                    self.connection.shutdown(2)
                except OSError:
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def reply(self, path: str, body: dict[str, Any] | None = None, top: dict[str, float] | None = None,
              probe: bool = False) -> dict[str, Any]:
        usage = {"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51}
        if path.endswith("/chat/completions") and self.chat_reply is not None and not probe:
            return self._scripted_chat(body or {}, usage)
        dist = top or (varied_top(body or {}) if self.varied else self.top)
        first = next(iter(dist))
        if path.endswith("/chat/completions"):
            top = [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in dist.items()]
            return {"id": "c1", "object": "chat.completion", "model": self.answered_model(body), "usage": usage,
                    "choices": [{"index": 0, "finish_reason": "length",
                                 "message": {"role": "assistant", "content": first.strip()},
                                 "logprobs": {"content": [{"token": first, "logprob": math.log(dist[first]), "top_logprobs": top}]}}]}
        return {"id": "t1", "object": "text_completion", "model": self.answered_model(body), "usage": usage,
                "choices": [{"index": 0, "text": first, "finish_reason": "length",
                             "logprobs": {"tokens": [first], "token_logprobs": [math.log(dist[first])],
                                          "top_logprobs": [{t: math.log(p) for t, p in dist.items()}],
                                          "text_offset": [0]}}]}

    def answered_model(self, body: dict[str, Any] | None) -> str:
        """The model a reply names: ``reply_model`` when set, else the one the request asked for."""
        return self.reply_model or str((body or {}).get("model") or "fault-model")

    def kill_at(self, pid: int, request_number: int) -> None:
        """SIGKILL ``pid`` when the ``request_number``-th completions request (counting from 1) arrives."""
        with self.lock:
            self._kill = (pid, request_number)

    def completion_requests(self) -> list[dict[str, Any]]:
        """Every completions request so far (what the upstream was paid for)."""
        with self.lock:
            return list(self.requests)

    def _scripted_chat(self, body: dict[str, Any], usage: dict[str, int]) -> dict[str, Any]:
        scripted = self.chat_reply(body) if callable(self.chat_reply) else self.chat_reply
        message = {"content": scripted} if isinstance(scripted, str) else dict(scripted)
        message = {"role": "assistant", "content": message.get("content"), **message}
        finish = message.pop("finish_reason", None) or ("tool_calls" if message.get("tool_calls") else "stop")
        choice = {"index": 0, "finish_reason": finish, "message": message, "logprobs": None}
        if "stop_reason" in message:  # vLLM's word for the stop string it stopped on
            choice["stop_reason"] = message.pop("stop_reason")
        prompt = message.pop("prompt_tokens", usage["prompt_tokens"])
        return {"id": "c1", "object": "chat.completion", "model": self.answered_model(body),
                "usage": {**usage, "prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5},
                "choices": [choice]}

    def hold_after(self, n: int) -> None:
        """Answer ``n`` more completion requests; hold every later one until :meth:`release`."""
        with self.lock:
            self.gate.clear()
            self.hold_from = len(self.requests) + n

    def release(self) -> None:
        self.gate.set()

    def queue(self, *faults: str) -> None:
        with self.lock:
            self.faults.extend(faults)

    def __enter__(self) -> "FaultServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.gate.set()
        self._httpd.shutdown()
        self._httpd.server_close()


if __name__ == "__main__":  # run standalone for manual poking or subprocess tests
    import sys

    delay = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    srv = FaultServer(delay_s=delay)
    print(srv.port, flush=True)
    with srv:
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
