"""Record the model calls an external agent (pi) makes through the jail's relay, into the store.

An external executor cannot call through Python, but every byte it sends to the model passes
the host side of the relay. A :class:`RelayRecorder` tap keeps the head of each request and
response (capped), and when the reply ends (per request behind a policy; per connection on a
plain byte relay) reads the HTTP status and the ``usage`` of the reply (a JSON body, or the
last server-sent event that carries one) and commits a ``relay`` call linked to the task's run.
A request the relay refused is committed too, as a failed call with its 403. Under a stop flag
(:func:`veriscale.models.cancel.current_stop` where the recorder is made; ``harness run`` sets one
for Ctrl-C and SIGTERM) a set flag commits every request still waiting on its reply at once, as a
``cancelled`` call (the killed session will never see that reply)::

    recorder = RelayRecorder(store, run_id=7, model="http://127.0.0.1:8000/v1#m", label="resolve")
    ModelForward(endpoint, policy=RelayPolicy.for_api("/v1", "m"), tap_factory=recorder.tap)
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from veriscale.engine.store import Store
from veriscale.harness.jail.jail_relay import Tap
from veriscale.models.cancel import current_stop

#: Bytes of a request and of a response kept for reading (the rest is relayed, not kept).
KEEP_REQUEST_BYTES = 1 << 20
KEEP_RESPONSE_BYTES = 8 << 20


def _dechunk(body: bytes) -> bytes:
    out, rest = bytearray(), body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
        except ValueError:
            break
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2:]
    return bytes(out)


def read_reply(raw: bytes) -> tuple[int, dict[str, Any] | None]:
    """``(HTTP status, usage or None)`` of a raw HTTP response (JSON or server-sent events)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return 0, None
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
    if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        body = _dechunk(body)
    usage = None
    try:
        usage = (json.loads(body) or {}).get("usage")
    except (ValueError, AttributeError):
        for line in body.splitlines():  # server-sent events: the last one with usage wins
            if line.startswith(b"data:") and b'"usage"' in line:
                try:
                    usage = json.loads(line[5:].strip()).get("usage") or usage
                except (ValueError, AttributeError):
                    continue
    return status, usage if isinstance(usage, dict) else None


class _CallTap(Tap):
    def __init__(self, recorder: "RelayRecorder") -> None:
        self.recorder = recorder
        self.started = time.perf_counter()
        self.sent = bytearray()
        self.received = bytearray()
        self._done = threading.Lock()  # held once the call is committed: it is committed once

    def request(self, data: bytes) -> None:
        if len(self.sent) < KEEP_REQUEST_BYTES:
            self.sent += data[: KEEP_REQUEST_BYTES - len(self.sent)]

    def response(self, data: bytes) -> None:
        if len(self.received) < KEEP_RESPONSE_BYTES:
            self.received += data[: KEEP_RESPONSE_BYTES - len(self.received)]

    def close(self, *, cancelled: bool = False) -> None:
        if not self._done.acquire(blocking=False):
            return
        self.recorder.forget(self)
        self.recorder.record(bytes(self.sent), bytes(self.received), time.perf_counter() - self.started,
                             cancelled=cancelled)


class RelayRecorder:
    """Commits one ``relay`` call per relayed request to ``store``, linked to ``run_id``."""

    def __init__(self, store: Store, *, run_id: int | None, model: str, label: str | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.model = model
        self.label = label
        self._open: dict[int, _CallTap] = {}
        self._lock = threading.Lock()
        stop = current_stop()
        if stop is not None:
            stop.on_set(self._cancel_open)  # the flag lives for one run: registered for its life

    def tap(self) -> Tap:
        tap = _CallTap(self)
        with self._lock:
            self._open[id(tap)] = tap
        return tap

    def forget(self, tap: _CallTap) -> None:
        with self._lock:
            self._open.pop(id(tap), None)

    def _cancel_open(self) -> None:
        with self._lock:
            waiting = list(self._open.values())
        for tap in waiting:
            try:
                tap.close(cancelled=True)
            except Exception:  # noqa: BLE001 - a store that cannot be written must not stop the stop itself
                pass

    def record(self, sent: bytes, received: bytes, latency_s: float, *, cancelled: bool = False) -> None:
        request_line = sent.split(b"\r\n", 1)[0].decode("latin-1", "replace")
        if not request_line:
            return  # a connection that sent nothing
        status, usage = read_reply(received)
        usage = usage or {}
        prompt = int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0)
        details = usage.get("prompt_tokens_details") or {}
        cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
        completion = int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)
        ok = 200 <= status < 300 and not cancelled
        key = f"relay-{uuid.uuid4().hex}"
        error = (f"cancelled: the run was stopped while this call waited on its reply: {request_line}" if cancelled
                 else None if ok else f"HTTP {status or 'no answer'}: {request_line}")
        self.store.put_call(key, model=self.model, fingerprint=f"relay:{self.model}", prompt_version="relay",
                            request={"request": request_line, "bytes": len(sent)},
                            status="cancelled" if cancelled else "ok" if ok else "failed",
                            response={"status": status, "usage": usage} if ok else None, error=error,
                            latency_s=latency_s, kind="relay", prompt_tokens=prompt, cached_tokens=cached,
                            completion_tokens=completion)
        if self.run_id is not None:
            self.store.link_call(self.run_id, key, cache_hit=False, label=self.label)
