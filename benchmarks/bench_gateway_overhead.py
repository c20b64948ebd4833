"""Calls per second through the gateway vs a bare ``httpx.AsyncClient`` loop, same requests,
same zero-latency local endpoint, in one run (target ratio >= 0.8).

    python benchmarks/bench_gateway_overhead.py --calls 2000 --concurrency 32 [--json out.json]

The endpoint is a raw asyncio HTTP server in its own process that answers every POST at once
with a fixed chat completion carrying logprobs, so what is measured is the client side: the
gateway's routing, limits, budget and parsing (``--store`` adds SQLite commits of every call,
with the cache off), against a loop that only sends the bodies and reads the JSON. Rounds
alternate which side goes first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import socket
import tempfile
import time
from pathlib import Path

import httpx

from veriscale.engine.gateway import Gateway, PlannedCall
from veriscale.engine.store import Store
from veriscale.models.base import Message, ScoreRequest
from veriscale.models.openai_compat import OpenAICompatModel

REPLY = json.dumps({
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "length",
                 "logprobs": {"content": [{"token": "A", "logprob": -0.1, "top_logprobs": [
                     {"token": "A", "logprob": -0.1}, {"token": "B", "logprob": -2.5}, {"token": "C", "logprob": -4.0}]}]}}],
    "usage": {"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51},
}).encode()
MODELS = json.dumps({"data": [{"id": "bench"}]}).encode()


class _Instant(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, rest = self.buffer.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(rest) < length:
                return
            self.buffer = rest[length:]
            body = MODELS if head.startswith(b"GET") else REPLY
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"  # type: ignore[attr-defined]
                                 % (len(body), body))


def _serve(port: int) -> None:
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(loop.create_server(_Instant, "127.0.0.1", port, backlog=1024))
    loop.run_until_complete(server.serve_forever())


def _requests(n: int) -> list[ScoreRequest]:
    return [ScoreRequest(messages=(Message("system", "Grade the answer."), Message("user", f"Answer number {i}.")),
                         prefill="Grade:", labels=("A", "B", "C")) for i in range(n)]


async def _gateway_round(url: str, requests: list[ScoreRequest], concurrency: int, store: Store | None) -> float:
    model = OpenAICompatModel(url, model="bench", concurrency=concurrency, max_retries=0)
    gateway = Gateway(model, store, prompt_version="bench", concurrency=concurrency, refresh=True)
    started = time.perf_counter()
    outcomes = await gateway.run([PlannedCall(r) for r in requests])
    elapsed = time.perf_counter() - started
    assert all(o.response is not None for o in outcomes)
    return len(requests) / elapsed


async def _bare_round(url: str, requests: list[ScoreRequest], concurrency: int) -> float:
    bodies = [{"model": "bench", "messages": [{"role": m.role, "content": m.content} for m in r.messages],
               "max_tokens": 1, "temperature": 0.0, "logprobs": True, "top_logprobs": 20} for r in requests]
    slots = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency)) as client:
        async def one(body: dict) -> None:
            async with slots:
                resp = await client.post(url + "/chat/completions", json=body)
                resp.json()

        started = time.perf_counter()
        await asyncio.gather(*(one(b) for b in bodies))
        return len(bodies) / (time.perf_counter() - started)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--store", action="store_true", help="commit every call to a SQLite store (cache off)")
    ap.add_argument("--json")
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = multiprocessing.Process(target=_serve, args=(port,), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(100):
        try:
            httpx.get(url + "/models", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.05)
    requests = _requests(args.calls)
    ours, bare = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for round_no in range(args.rounds):
            store = Store.open(Path(tmp) / f"round{round_no}.sqlite3") if args.store else None
            first_ours = round_no % 2 == 0
            for side in ((0, 1) if first_ours else (1, 0)):
                if side == 0:
                    ours.append(asyncio.run(_gateway_round(url, requests, args.concurrency, store)))
                else:
                    bare.append(asyncio.run(_bare_round(url, requests, args.concurrency)))
    server.terminate()
    result = {"calls": args.calls, "concurrency": args.concurrency, "store": args.store,
              "gateway_calls_per_s": round(sorted(ours)[len(ours) // 2], 1),
              "bare_httpx_calls_per_s": round(sorted(bare)[len(bare) // 2], 1)}
    result["ratio"] = round(result["gateway_calls_per_s"] / result["bare_httpx_calls_per_s"], 3)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
