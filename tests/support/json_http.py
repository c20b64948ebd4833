"""What the HTTP test doubles share: a handler that answers JSON and logs nothing, and a server for it
on a free 127.0.0.1 port in a daemon thread::

    class Handler(JsonHandler):
        def do_GET(self): self.send_json(200, {"ok": True})

    httpd, url, thread = local_server(Handler)     # url: http://127.0.0.1:PORT/v1; thread.start() serves
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler with :meth:`send_json` and no access log."""

    def log_message(self, *args: Any) -> None:
        pass

    def read_json(self) -> Any:
        """The request's JSON body ({} when empty)."""
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

    def send_json(self, code: int, payload: Any) -> None:
        """``payload`` as the JSON reply with status ``code`` (a client that hung up is not an error)."""
        raw = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        try:
            self.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass


def local_server(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str, threading.Thread]:
    """A threading server for ``handler`` on 127.0.0.1 (a free port), its ``/v1`` URL, and the daemon
    thread that serves it once started."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    return httpd, url, threading.Thread(target=httpd.serve_forever, daemon=True)
