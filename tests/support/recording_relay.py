"""A relay on 127.0.0.1 in front of a real server that records every exchange, so a test can tell
what the product sent from what the server answered::

    with RecordingRelay("http://127.0.0.1:P/v1") as relay:
        model = load_backend(f"{relay.url}?sample=16#m")     # relay.url: http://127.0.0.1:Q/v1
        ...
        relay.exchanges   # [{"method", "path", "body", "status", "reply"}] in the order answered
        relay.clear()     # forget what was recorded so far

Bodies and replies are kept as parsed JSON (None where there was none); the relay adds nothing to
a request or a reply.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx

from tests.support.json_http import JsonHandler, local_server


class RecordingRelay:
    def __init__(self, upstream_v1: str) -> None:
        self.upstream_root = upstream_v1.removesuffix("/v1")
        self.exchanges: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        relay = self

        class Handler(JsonHandler):
            def _relay(self, method: str) -> None:
                body = self.read_json() if method == "POST" else None
                with httpx.Client(timeout=600) as client:
                    resp = client.request(method, relay.upstream_root + self.path,
                                          json=body if method == "POST" else None)
                try:
                    reply = resp.json()
                except ValueError:
                    reply = None
                with relay._lock:
                    relay.exchanges.append({"method": method, "path": self.path, "body": body,
                                            "status": resp.status_code, "reply": reply})
                self.send_json(resp.status_code, reply)

            def do_GET(self) -> None:
                self._relay("GET")

            def do_POST(self) -> None:
                self._relay("POST")

        self._httpd, self.url, self._thread = local_server(Handler)

    def clear(self) -> None:
        with self._lock:
            self.exchanges.clear()

    def __enter__(self) -> RecordingRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
