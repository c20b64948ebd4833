"""The model relay's host side against hostile requests: a real socket client, the real forward, a
real 127.0.0.1 upstream that keeps every byte that reaches it.

Each refused request must get a 403 with a one-sentence body and leave the upstream untouched
(so the key cannot have reached it); allowed calls, pipelined ones and streamed replies still work.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from veriscale.harness.jail.netjail import ModelForward
from veriscale.harness.jail.relay_gate import RelayPolicy

KEY = "sk-host-only-5f1c"
MODEL = "judge-m"
PATH = "/v1/chat/completions"
HANG_GUARD_S = 20.0


class Upstream:
    """A plain TCP server on 127.0.0.1 that records the raw bytes of each connection.

    It answers one request per connection (the relay sends ``Connection: close``): a JSON reply,
    or, when the body asks to stream, server-sent events whose last part waits for ``release``.
    """

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()
        self.connections: list[bytes] = []
        self.release = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(HANG_GUARD_S)
        seen = bytearray()  # every byte this connection brought, kept even if it never forms a request
        try:
            while b"\r\n\r\n" not in seen and (chunk := conn.recv(65536)):
                seen += chunk
            head, _, body = bytes(seen).partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length and (chunk := conn.recv(65536)):
                seen += chunk
                body += chunk
            self.connections.append(bytes(seen))  # before replying: the test reads it once answered
            seen = bytearray()
            if b'"stream": true' in body:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
                first = b'data: {"choices": [{"delta": {"content": "hel"}}]}\n\n'
                conn.sendall(b"%x\r\n%s\r\n" % (len(first), first))
                self.release.wait(HANG_GUARD_S)  # the client must have seen the first event by now
                last = b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}\n\ndata: [DONE]\n\n'
                conn.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(last), last))
            else:
                reply = json.dumps({"choices": [{"message": {"content": "ok"}}], "echo": len(body)}).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(reply), reply))
        except OSError:
            pass
        finally:
            if seen:
                self.connections.append(bytes(seen))
            conn.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture()
def relay() -> Iterator[tuple[ModelForward, Upstream]]:
    upstream = Upstream()
    policy = RelayPolicy.for_api("/v1", MODEL)
    with ModelForward(upstream.address, policy=policy, headers={"Authorization": f"Bearer {KEY}"}) as forward:
        yield forward, upstream
    upstream.close()


def talk(forward: ModelForward, raw: bytes, replies: int = 1) -> bytes:
    """Send ``raw`` on one connection to the relay; read until it closes or ``replies`` ended."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(HANG_GUARD_S)
    client.connect(str(forward.socket_path))
    client.sendall(raw)
    client.shutdown(socket.SHUT_WR)
    data = b""
    while chunk := client.recv(65536):
        data += chunk
    client.close()
    return data


def chat(model: str = MODEL, *, target: bytes = PATH.encode(), method: bytes = b"POST", extra: bytes = b"",
         stream: bool = False) -> bytes:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}).encode()
    return (b"%s %s HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer session-forged\r\n"
            b"Content-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s" % (method, target, extra, len(body), body))


def refused(reply: bytes) -> str:
    """The one sentence of a 403, after checking the reply is exactly that."""
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 "), reply[:300]
    sentence = body.decode()
    assert sentence.endswith(".\n") and sentence.count("\n") == 1 and "veriscale's model relay refused" in sentence
    assert KEY not in sentence
    return sentence


def test_an_allowed_call_goes_out_rewritten_with_the_key(relay) -> None:
    forward, upstream = relay
    reply = talk(forward, chat(extra=b"X-Forwarded-Host: evil.example\r\nX-Stainless-Lang: js\r\n"))
    assert reply.startswith(b"HTTP/1.1 200 ") and b'"content": "ok"' in reply
    (seen,) = upstream.connections
    head = seen.split(b"\r\n\r\n")[0].decode()
    lines = head.split("\r\n")
    assert lines[0] == f"POST {PATH} HTTP/1.1"
    host, port = upstream.address
    assert f"host: {host}:{port}" in head.lower() and "127.0.0.1:8080" not in head
    assert lines.count(f"Authorization: Bearer {KEY}") == 1 and "session-forged" not in head
    assert "evil.example" not in head and "x-stainless-lang: js" in head.lower()


ATTACKS = {
    "absolute-form metadata URL": b"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n",
    "absolute-form to the endpoint itself": chat(target=b"http://127.0.0.1:8080/v1/chat/completions"),
    "CONNECT": b"CONNECT 169.254.169.254:80 HTTP/1.1\r\nHost: 169.254.169.254:80\r\n\r\n",
    "another path": chat(target=b"/v1/embeddings"),
    "a dotted path": chat(target=b"/v1/chat/completions/../../admin"),
    "a query": chat(target=b"/v1/chat/completions?api_base=http://evil.example"),
    "another method": chat(method=b"PUT"),
    "GET models": b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "another model": chat(model="gpt-4o-expensive"),
    "a body that is not JSON": (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"),
    "bare-LF head": chat().replace(b"\r\n", b"\n"),
    "one bare LF line": chat().replace(b"Content-Type: application/json\r\n", b"Content-Type: application/json\n"),
    "a bare CR": chat().replace(b"Content-Type: application/json\r\n", b"Content-Type: application/json\rX: y\r\n"),
    "folded header": chat(extra=b"X-Note: a\r\n Authorization: Bearer folded\r\n"),
    "CL and TE": chat(extra=b"Transfer-Encoding: chunked\r\n"),
    "two Content-Lengths": chat(extra=b"Content-Length: 3\r\n"),
    "space before colon": chat(extra=b"Transfer-Encoding : chunked\r\n"),
    "two Hosts": chat(extra=b"Host: 169.254.169.254\r\n"),
    "HTTP/2 preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "a NUL in a header": chat(extra=b"X-A: b\x00c\r\n"),
    "an oversized head": b"POST /v1/chat/completions HTTP/1.1\r\nX: " + b"a" * (200 * 1024),
    "a body shorter than declared": chat()[:-5],
    "a declared body over 32 MiB": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n{",
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_refused_request_gets_one_sentence_and_never_reaches_the_upstream(relay, attack: str) -> None:
    forward, upstream = relay
    sentence = refused(talk(forward, ATTACKS[attack]))
    assert f"only POST {PATH} for model '{MODEL}' reaches the model endpoint." in sentence
    assert upstream.connections == [], "nothing of a refused request (and so no key) reached the upstream"


def test_a_pipelined_second_request_is_judged_on_its_own(relay) -> None:
    forward, upstream = relay
    sneaky = b"GET http://169.254.169.254/latest/meta-data/iam HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n"
    reply = talk(forward, chat() + sneaky)
    first, _, second = reply.partition(b"HTTP/1.1 403 ")
    assert first.startswith(b"HTTP/1.1 200 ") and b'"content": "ok"' in first
    assert "GET http://169.254.169.254/latest/meta-data/iam" in refused(b"HTTP/1.1 403 " + second)
    assert len(upstream.connections) == 1 and b"169.254" not in upstream.connections[0]


def test_pipelined_allowed_calls_each_go_out_rewritten(relay) -> None:
    forward, upstream = relay
    reply = talk(forward, chat() + chat() + chat(model="other"))
    assert reply.count(b"HTTP/1.1 200 ") == 2 and reply.count(b"HTTP/1.1 403 ") == 1
    assert len(upstream.connections) == 2
    for seen in upstream.connections:
        head = seen.split(b"\r\n\r\n")[0]
        assert head.count(f"Authorization: Bearer {KEY}".encode()) == 1 and b"session-forged" not in head
        assert json.loads(seen.split(b"\r\n\r\n", 1)[1])["model"] == MODEL


def test_a_chunked_request_body_goes_out_with_a_length_of_its_own(relay) -> None:
    forward, upstream = relay
    body = json.dumps({"model": MODEL, "messages": []}).encode()
    raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    assert talk(forward, raw).startswith(b"HTTP/1.1 200 ")
    (seen,) = upstream.connections
    head, _, sent = seen.partition(b"\r\n\r\n")
    assert sent == body and b"content-length: %d" % len(body) in head.lower() and b"transfer-encoding" not in head.lower()


def test_a_streamed_reply_reaches_the_session_as_it_is_made(relay) -> None:
    forward, upstream = relay
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(HANG_GUARD_S)  # a relay that held the reply back until its end would hang here
    client.connect(str(forward.socket_path))
    client.sendall(chat(stream=True))
    data = b""
    while b'"hel"' not in data:
        chunk = client.recv(65536)
        assert chunk, data
        data += chunk
    upstream.release.set()  # only now does the upstream finish its reply
    while b"0\r\n\r\n" not in data:
        chunk = client.recv(65536)
        assert chunk, data
        data += chunk
    client.close()
    assert data.startswith(b"HTTP/1.1 200 ") and b"text/event-stream" in data and b"[DONE]" in data
    assert b'"completion_tokens": 2' in data


def test_the_key_is_never_added_without_a_policy() -> None:
    with pytest.raises(ValueError, match="need a policy"):
        ModelForward(("127.0.0.1", 9), headers={"Authorization": f"Bearer {KEY}"})


def test_refusals_and_calls_are_recorded_one_per_request(relay, tmp_path) -> None:
    from veriscale.engine.store import Store
    from veriscale.harness.jail.relay_record import RelayRecorder

    _, upstream = relay
    store = Store.open(tmp_path / "store.sqlite3")
    run = store.start_run("harness task", "m", {})
    recorder = RelayRecorder(store, run_id=run, model=f"http://127.0.0.1/v1#{MODEL}", label="resolve")
    policy = RelayPolicy.for_api("/v1", MODEL)
    with ModelForward(upstream.address, policy=policy, headers={"Authorization": f"Bearer {KEY}"},
                      tap_factory=recorder.tap) as forward:
        talk(forward, chat() + chat(target=b"http://169.254.169.254/"))
    calls = store.run_calls(run)
    assert [c["status"] for c in calls] == ["ok", "failed"]
    assert all(KEY not in json.dumps(c) for c in calls), "the store never keeps the host's key"


def test_a_long_conversation_goes_out_whole(relay) -> None:
    forward, upstream = relay
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "x" * (8 << 20)}]}).encode()
    raw = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    assert talk(forward, raw).startswith(b"HTTP/1.1 200 ")
    (seen,) = upstream.connections
    assert seen.split(b"\r\n\r\n", 1)[1] == body
