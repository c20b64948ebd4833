"""TEST DOUBLE — an OpenAI-compatible judge server with the Batch API, for ``select-many --batch``.

A real HTTP server on 127.0.0.1 (``ThreadingHTTPServer`` in a thread, as ``server_doubles`` does)
with the routes the openai SDK's batch and file resources call (their fields as in the SDK's
``openai/types/batch.py`` and ``file_object.py``)::

    GET  /v1/models                     {"object": "list", "data": [{"id": "double-judge", ...}]}
    POST /v1/chat/completions           one-token replies with logprobs, as llama.cpp writes them
    POST /v1/files                      multipart: file (JSONL), purpose ("batch")
    GET  /v1/files?purpose=batch        the files
    GET  /v1/files/{id}/content         a file's bytes
    POST /v1/batches                    input_file_id, endpoint, completion_window
    GET  /v1/batches?limit=1, /v1/batches/{id}

It grades the way ``scripted_model`` does, over HTTP: the response a score slot belongs to (the
final assistant message is the prefill, llama.cpp continues it) is graded high when it holds the
word GOOD, low otherwise, with a spread that depends on the response's length so the
probabilities are not all alike. A batch is answered line by line by the same function as a
direct request. What it counts, for the tests::

    with BatchDouble() as srv:
        srv.url                         # http://127.0.0.1:PORT/v1
        srv.batches                     # {batch id: {"custom_ids": [...], "polls": n, "status": ...}}
        srv.direct                      # direct /v1/chat/completions requests answered
        srv.hold = True                 # new batches stay "in_progress" until srv.release()
        srv.submitted.wait(30)          # set when a batch is created
        srv.polled.wait(30)             # set when a batch is first polled
        srv.fail = True                 # new batches end "failed"
        BatchDouble(batch_api=False)    # /v1/batches and /v1/files answer 404
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

MODEL = "double-judge"
LETTERS = [chr(c) for c in range(ord("A"), ord("U"))]  # the letters scale: A (best) .. T


def slot_text(body: dict[str, Any]) -> tuple[str, str]:
    """The graded response's text and the prefill of a chat body (scripted_model's rule)."""
    messages = body.get("messages") or []
    prefill = messages[-1]["content"] if messages and messages[-1].get("role") == "assistant" else ""
    user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    if "## First response" in user:
        first = user.split("## First response", 1)[1].split("## Second response", 1)[0]
        second = user.split("## Second response", 1)[1].split("## Criterion", 1)[0]
        return (first if "first response" in prefill.lower() else second), prefill
    if "## Response" in user:
        return user.split("## Response", 1)[1].split("## Criterion", 1)[0], prefill
    return "", prefill


def distribution(body: dict[str, Any]) -> dict[str, float]:
    """The next-token distribution at the body's slot."""
    text, prefill = slot_text(body)
    if prefill.endswith("The capital of France is Pa"):
        return {"ris": 0.95, " Paris": 0.05}
    spread = (len(text) % 7) / 100.0
    if "GOOD" in text:
        return {"A": 0.5 + spread, "B": 0.25, "C": 0.1 - spread / 2, " the": 0.15 - spread / 2}
    if text:
        return {"T": 0.45 + spread, "S": 0.25, "K": 0.15, "B": 0.05, " the": 0.1 - spread}
    return {"A": 0.6, "B": 0.2, "C": 0.1, " the": 0.1}


def completion(body: dict[str, Any], ident: str) -> dict[str, Any]:
    """A chat completion as llama.cpp answers it: one token, ``logprobs.content[0].top_logprobs``."""
    dist = distribution(body)
    ranked = sorted(dist.items(), key=lambda kv: -kv[1])[:max(1, int(body.get("top_logprobs") or 5))]
    tops = [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in ranked]
    first = ranked[0][0]
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length",
                              "message": {"role": "assistant", "content": first}}
    if body.get("logprobs"):
        choice["logprobs"] = {"content": [{**tops[0], "top_logprobs": tops}]}
    prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
    return {"id": ident, "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or MODEL, "choices": [choice],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1}}


class BatchDouble:
    """The server (module docstring); a context manager that starts and stops it."""

    def __init__(self, *, batch_api: bool = True) -> None:
        self.batch_api = batch_api
        self.hold = False
        self.fail = False
        self.submitted = threading.Event()
        self.polled = threading.Event()  # set at the first poll of a batch (its client has recorded it)
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.direct = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, name="batch-double", daemon=True)

    def __enter__(self) -> BatchDouble:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- what the tests see and do ----------------------------------------------------------
    def custom_ids(self) -> list[str]:
        """Every custom_id of every batch created, in order (one submitted twice shows twice)."""
        return [cid for b in self.batches.values() for cid in b["custom_ids"]]

    def release(self) -> None:
        """Let held batches finish (at their next poll)."""
        with self._lock:
            self.hold = False
            for batch in self.batches.values():
                batch["held"] = False

    # -- the server's side ------------------------------------------------------------------
    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def _file(self, data: bytes, purpose: str, name: str) -> dict[str, Any]:
        fid = self._new_id("file")
        self.files[fid] = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                           "filename": name, "purpose": purpose, "status": "processed", "data": data}
        return self.files[fid]

    def _create_batch(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        source = self.files.get(str(params.get("input_file_id")))
        if source is None or params.get("completion_window") != "24h" or not params.get("endpoint"):
            return 400, {"error": {"message": "input_file_id, endpoint and completion_window 24h are required"}}
        lines = [json.loads(raw) for raw in source["data"].decode().splitlines() if raw.strip()]
        bid = self._new_id("batch")
        self.batches[bid] = {"id": bid, "object": "batch", "endpoint": params["endpoint"], "errors": None,
                             "input_file_id": source["id"], "completion_window": "24h", "status": "in_progress",
                             "created_at": int(time.time()), "output_file_id": None, "error_file_id": None,
                             "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                             "custom_ids": [line["custom_id"] for line in lines], "lines": lines, "polls": 0,
                             "held": self.hold, "fails": self.fail}
        self.submitted.set()
        return 200, self._shown(self.batches[bid])

    def _advance(self, batch: dict[str, Any]) -> None:
        """An in-progress batch that is not held ends: answered line by line, or failed."""
        if batch["status"] != "in_progress" or batch["held"]:
            return
        if batch["fails"]:
            batch.update(status="failed", failed_at=int(time.time()), errors={"object": "list", "data": [
                {"code": "double_failure", "message": "the test double failed this batch", "line": None}]})
            return
        out = []
        for line in batch["lines"]:
            reply = completion(line["body"], self._new_id("chatcmpl"))
            out.append({"id": self._new_id("batch_req"), "custom_id": line["custom_id"], "error": None,
                        "response": {"status_code": 200, "request_id": self._new_id("req"), "body": reply}})
        data = "".join(json.dumps(line) + "\n" for line in out).encode()
        batch["output_file_id"] = self._file(data, "batch_output", f"{batch['id']}_output.jsonl")["id"]
        batch["request_counts"]["completed"] = len(out)
        batch.update(status="completed", completed_at=int(time.time()))

    @staticmethod
    def _shown(batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in batch.items() if k not in ("custom_ids", "lines", "polls", "held", "fails")}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: Any, raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream" if raw is not None else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _batchy(self, path: str) -> bool:
                return path.startswith(("/v1/batches", "/v1/files"))

            def do_GET(self) -> None:
                url = urlparse(self.path)
                path = url.path.rstrip("/")
                if path == "/v1/models":
                    return self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model",
                                                                         "owned_by": "test-double"}]})
                if self._batchy(path) and not double.batch_api:
                    return self._send(404, {"error": {"message": "Not Found"}})
                with double._lock:
                    parts = path.split("/")
                    if path == "/v1/batches":
                        data = [double._shown(b) for b in double.batches.values()]
                        return self._send(200, {"object": "list", "data": data, "has_more": False})
                    if path == "/v1/files":
                        purpose = parse_qs(url.query).get("purpose", [None])[0]
                        data = [{k: v for k, v in f.items() if k != "data"} for f in double.files.values()
                                if purpose in (None, f["purpose"])]
                        return self._send(200, {"object": "list", "data": data, "has_more": False})
                    if len(parts) == 4 and parts[2] == "batches" and parts[3] in double.batches:
                        batch = double.batches[parts[3]]
                        batch["polls"] += 1
                        double.polled.set()
                        double._advance(batch)
                        return self._send(200, double._shown(batch))
                    if len(parts) == 5 and parts[2] == "files" and parts[4] == "content" and parts[3] in double.files:
                        return self._send(200, None, raw=double.files[parts[3]]["data"])
                return self._send(404, {"error": {"message": f"no route {path}"}})

            def do_POST(self) -> None:
                path = urlparse(self.path).path.rstrip("/")
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if path == "/v1/chat/completions":
                    with double._lock:
                        double.direct += 1
                        ident = double._new_id("chatcmpl")
                    return self._send(200, completion(json.loads(raw), ident))
                if self._batchy(path) and not double.batch_api:
                    return self._send(404, {"error": {"message": "Not Found"}})
                with double._lock:
                    if path == "/v1/files":
                        head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
                        form = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
                        fields = {part.get_param("name", header="content-disposition"): part
                                  for part in form.iter_parts()}
                        purpose = fields["purpose"].get_content().strip()
                        upload = fields["file"]
                        name = upload.get_filename() or "upload.jsonl"
                        found = double._file(upload.get_payload(decode=True), purpose, name)
                        return self._send(200, {k: v for k, v in found.items() if k != "data"})
                    if path == "/v1/batches":
                        status, payload = double._create_batch(json.loads(raw))
                        return self._send(status, payload)
                return self._send(404, {"error": {"message": f"no route {path}"}})

        return Handler
