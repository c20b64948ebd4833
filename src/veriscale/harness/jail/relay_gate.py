"""The host side of the model relay: each request parsed strictly and checked before it may leave.

A jailed session's bytes reach the host's :class:`~veriscale.harness.jail.netjail.ModelForward`
as one HTTP/1.1 stream. :class:`RelayGate` reads it one request at a time with h11 (a pipelined
second request is parsed and judged on its own), refuses anything but the model calls the phase
needs (:class:`RelayPolicy`: method, origin-form path, the configured model in the JSON body),
and forwards an allowed request re-serialised: the session's own auth, Host and framing headers
are dropped, ``Host`` names the upstream, the host's headers (the API key) are added, and the
body goes out with a ``Content-Length`` of its own. A refused request gets an HTTP 403 whose body
is one sentence, and its connection is closed; nothing of it reaches the upstream.

The body is judged as JSON strictly, so that what the relay checked is what the upstream reads:
a key repeated in any object (two ``"model"`` keys, of which an upstream might take the other),
``NaN``/``Infinity``, a number that overflows to infinity (``1e400``) and a lone surrogate
(``"\\ud800"``) are refused; the phase's caps bound what a call may cost under the host's key
(``n`` and ``best_of`` at most ``max_n``; ``max_tokens`` and ``max_completion_tokens`` positive
integers at most ``max_tokens``, which sits above the 32,000 tokens pi ever asks for). What goes
upstream is the parsed document written again (:meth:`RelayPolicy.check_body` returns those
bytes), never the session's raw bytes::

    policy = RelayPolicy.for_api("/v1", model="qwen3")      # POST /v1/chat/completions, model qwen3
    gate = RelayGate(("127.0.0.1", 8000), policy, headers={"Authorization": "Bearer sk-..."})
    gate.handle(client_socket)                              # serves that connection until it ends
    RelayPolicy.for_api("/v1", "qwen3", max_n=1, max_tokens=4096).check_body(raw)  # the bytes to forward, or Refused
"""

from __future__ import annotations

import json
import math
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
import h11

from veriscale.harness.jail.jail_relay import CHUNK_BYTES, IDLE_TIMEOUT_S, Tap

Endpoint = tuple[str, int]

#: Longest request head (request line and headers) read.
MAX_HEAD_BYTES = 64 * 1024
#: Largest request body read (a long conversation re-sent whole stays far below it).
MAX_BODY_BYTES = 32 * 1024 * 1024
#: Upper bound on the time to open a connection to the model endpoint.
CONNECT_TIMEOUT_S = 10.0
#: After a refusal, unread bytes of the session's request are drained at most this long, so it sees the 403.
DRAIN_S = 2.0
#: Request headers of the session that are passed on (all others are dropped).
_PASSED = (b"accept", b"content-type", b"user-agent")
_PASSED_PREFIX = b"x-stainless-"  # the OpenAI SDKs' client description
#: Response headers that describe the hop, not the message (h11 frames the reply to the session).
_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"trailer", b"upgrade", b"proxy-connection"}
_BAD_ENDING = re.compile(rb"(?<!\r)\n|\r(?!\n)")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Completions one call may ask for, unless the phase's policy says otherwise.
DEFAULT_MAX_N = 1
#: Tokens one reply may ask for, unless the phase's policy says otherwise (pi asks for at most 32,000).
DEFAULT_MAX_TOKENS = 32768


class Refused(Exception):
    """A request the relay will not forward; the message ends the 403's one sentence."""


@dataclass(frozen=True)
class RelayPolicy:
    """The model calls a session may make: ``methods`` x ``paths`` (exact origin-form targets),
    each with ``"model": model`` in its JSON body, asking for at most ``max_n`` completions
    (``n``, ``best_of``) of at most ``max_tokens`` tokens (``max_tokens``, ``max_completion_tokens``)."""

    model: str
    paths: tuple[str, ...] = ("/v1/chat/completions",)
    methods: tuple[str, ...] = ("POST",)
    max_n: int = DEFAULT_MAX_N
    max_tokens: int = DEFAULT_MAX_TOKENS

    def __post_init__(self) -> None:
        for name in ("max_n", "max_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"relay policy {name}={value!r} is not a positive integer: give 1 or more")

    @classmethod
    def for_api(cls, base_path: str, model: str, *, max_n: int = DEFAULT_MAX_N,
                max_tokens: int = DEFAULT_MAX_TOKENS) -> "RelayPolicy":
        """Chat completions under an OpenAI-compatible ``base_path`` (``/v1``), for ``model``."""
        return cls(model=model, paths=(base_path.rstrip("/") + "/chat/completions",), max_n=max_n,
                   max_tokens=max_tokens)

    def allowed(self) -> str:
        """What passes, in words: ``POST /v1/chat/completions for model 'm'``."""
        return f"{' or '.join(self.methods)} {' or '.join(self.paths)} for model '{self.model}'"

    def check(self, method: str, target: str, body: bytes) -> bytes:
        """Raise :class:`Refused` unless the call is one this policy allows; the body to forward."""
        self.check_call(method, target)
        return self.check_body(body)

    def check_call(self, method: str, target: str) -> None:
        """Raise :class:`Refused` unless ``method`` and ``target`` (origin-form) are allowed."""
        if not target.startswith("/"):
            raise Refused("the target is not a path on the model endpoint (absolute-form and authority-form are refused)")
        if method not in self.methods or target not in self.paths:
            raise Refused("that method and path are not a model call this session needs")

    def check_body(self, body: bytes) -> bytes:
        """Raise :class:`Refused` unless ``body`` is a strict JSON object naming the configured model
        within the caps; the body to forward: the parsed document written again (UTF-8, no NaN)."""
        document = parse_body(body)
        if document.get("model") != self.model:
            raise Refused("its body does not name the configured model")
        for name, cap, what in (("n", self.max_n, "completions"), ("best_of", self.max_n, "completions"),
                                ("max_tokens", self.max_tokens, "tokens"),
                                ("max_completion_tokens", self.max_tokens, "tokens")):
            if name not in document:
                continue
            value = document[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise Refused(f"its body's {name} is not a positive integer")
            if value > cap:
                raise Refused(f"its body's {name} asks for more than this phase's cap of {cap} {what}")
        # json's default separators, so a body Python wrote goes out byte for byte as it came
        forwarded = json.dumps(document, ensure_ascii=False, allow_nan=False).encode("utf-8")
        if len(forwarded) > MAX_BODY_BYTES:  # numbers like 1e15 grow when written again
            raise Refused(f"its body written again is larger than {MAX_BODY_BYTES >> 20} MiB")
        return forwarded


def _no_repeats(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """An object hook for :func:`json.loads` that refuses a key given twice in one object."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise Refused(f"its body repeats the key '{_shown(key.encode('utf-8', 'replace'), 40)}' in one object")
            seen.add(key)
    return document


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Refused("its body holds a number too large to be finite")
    return value


def _no_constant(name: str) -> object:
    raise Refused(f"its body holds {name}, which is not JSON")


def parse_body(body: bytes) -> dict:
    """``body`` as a JSON object, parsed strictly: :class:`Refused` for anything but UTF-8 JSON
    whose objects repeat no key, whose numbers are finite and whose strings hold no lone surrogate."""
    try:
        document = json.loads(body.decode("utf-8"), object_pairs_hook=_no_repeats, parse_float=_finite,
                              parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise Refused("its body is not a JSON object") from None
    if not isinstance(document, dict):
        raise Refused("its body is not a JSON object")
    stack: list[object] = [document]
    while stack:  # iterative: a document json parsed may be deeper than this frame's recursion budget
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and _SURROGATE.search(item):
            raise Refused("its body holds a lone surrogate (a \\ud800-\\udfff escape), which is not text")
    return document


def _shown(raw: bytes, limit: int = 80) -> str:
    """Printable ASCII of ``raw`` (a method or target) for a refusal, cut to ``limit``."""
    text = "".join(ch if " " < ch < "\x7f" else "?" for ch in raw.decode("latin-1"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _refusal_bytes(sentence: str) -> bytes:
    body = (sentence + "\n").encode("utf-8")
    return (b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))


def _check_head(head: bytes) -> None:
    """Refuse what h11 would accept leniently: bare LF or CR, folded lines, ambiguous framing."""
    if _BAD_ENDING.search(head):
        raise Refused("its head has a line that does not end in CRLF")
    if b"\0" in head:
        raise Refused("its head holds a NUL byte")
    lines = head[:-4].split(b"\r\n")
    if any(line[:1] in (b" ", b"\t") for line in lines[1:]):
        raise Refused("its head has a folded (obs-fold) header line")
    names = [line.split(b":", 1)[0].lower() for line in lines[1:]]
    if names.count(b"content-length") > 1 or names.count(b"transfer-encoding") > 1:
        raise Refused("it repeats a framing header (Content-Length or Transfer-Encoding)")
    if b"content-length" in names and b"transfer-encoding" in names:
        raise Refused("it has both Content-Length and Transfer-Encoding")


class RelayGate:
    """Serves one session connection request by request (see the module docstring)."""

    def __init__(self, endpoint: Endpoint, policy: RelayPolicy, *, headers: Mapping[str, str] | None = None,
                 tap_factory: Callable[[], Tap] | None = None) -> None:
        self.endpoint = endpoint
        self.policy = policy
        self.added = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in (headers or {}).items()]
        self.tap_factory = tap_factory
        host, port = endpoint
        self.host_header = (f"[{host}]" if ":" in host else host).encode("idna") + b":%d" % port

    # -- one connection ----------------------------------------------------------------------

    def handle(self, client: socket.socket) -> None:
        """Answer requests on ``client`` until it closes, a request is refused or a reply is cut."""
        pending = b""
        try:
            while True:
                head, pending = self._read_head(client, pending)
                if head is None:
                    return
                leftover = self._one_request(client, head, pending)
                if leftover is None:
                    return
                pending = leftover
        except OSError:
            return
        finally:
            client.close()

    def _read_head(self, client: socket.socket, pending: bytes) -> tuple[bytes | None, bytes]:
        data = bytearray(pending)
        while True:
            end = data.find(b"\r\n\r\n")
            seen = data if end < 0 else data[: end + 4]
            if _BAD_ENDING.search(seen[:-1] if end < 0 and seen.endswith(b"\r") else seen):
                self._refuse(client, b"?", b"?", "its head has a line that does not end in CRLF")
                return None, b""
            if end >= 0:
                return bytes(data[: end + 4]), bytes(data[end + 4:])
            if len(data) > MAX_HEAD_BYTES:
                self._refuse(client, b"?", b"?", f"its head is longer than {MAX_HEAD_BYTES // 1024} KiB")
                return None, b""
            chunk = client.recv(CHUNK_BYTES)
            if not chunk:
                return None, b""  # the session closed (between requests, or mid-head: nothing to answer)
            data += chunk

    def _one_request(self, client: socket.socket, head: bytes, rest: bytes) -> bytes | None:
        """Read, judge and answer one request; the bytes after it, or None when the connection ends."""
        method, target = b"?", b"?"
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES + 1024)
        try:
            _check_head(head)
            conn.receive_data(head + rest)
            request = conn.next_event()
            if not isinstance(request, h11.Request):
                raise Refused("its head is not an HTTP/1.1 request")
            method, target = request.method, request.target
            self.policy.check_call(method.decode("latin-1"), target.decode("latin-1"))  # before any body is read
            declared = dict(request.headers).get(b"content-length")
            if declared is not None and int(declared) > MAX_BODY_BYTES:  # h11 checked it is digits
                raise Refused(f"its body is larger than {MAX_BODY_BYTES >> 20} MiB")
            body = self.policy.check_body(self._read_body(client, conn))  # forwarded as re-written here
        except Refused as exc:
            self._refuse(client, method, target, str(exc))
            return None
        except h11.RemoteProtocolError as exc:
            self._refuse(client, method, target, f"it is not well-formed HTTP/1.1 ({_shown(str(exc).encode(), 120)})")
            return None
        leftover = bytes(conn.trailing_data[0])  # a pipelined next request, judged on its own
        return leftover if self._forward(client, conn, request, body) else None

    def _read_body(self, client: socket.socket, conn: h11.Connection) -> bytes:
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                if conn.they_are_waiting_for_100_continue:
                    client.sendall(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
                conn.receive_data(client.recv(CHUNK_BYTES))
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY_BYTES:
                    raise Refused(f"its body is larger than {MAX_BODY_BYTES >> 20} MiB")
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)
            else:  # ConnectionClosed before the body ended
                raise Refused("its body ended before its declared length")

    def _refuse(self, client: socket.socket, method: bytes, target: bytes, reason: str) -> None:
        sentence = (f"veriscale's model relay refused {_shown(method)} {_shown(target)} because {reason}; "
                    f"only {self.policy.allowed()} reaches the model endpoint.")
        answer = _refusal_bytes(sentence)
        self._record(b"%s %s HTTP/1.1\r\n\r\n" % (_shown(method).encode(), _shown(target).encode()), answer)
        try:
            client.sendall(answer)
            client.shutdown(socket.SHUT_WR)
            client.settimeout(DRAIN_S)  # read what the session is still sending, so it gets the answer, not a reset
            drained, until = 0, time.monotonic() + DRAIN_S
            while drained < MAX_BODY_BYTES and time.monotonic() < until and (chunk := client.recv(CHUNK_BYTES)):
                drained += len(chunk)
        except OSError:
            pass

    def _record(self, request: bytes, response: bytes) -> None:
        if self.tap_factory is not None:
            tap = self.tap_factory()
            tap.request(request)
            tap.response(response)
            tap.close()

    # -- the allowed request -----------------------------------------------------------------

    def _forward(self, client: socket.socket, conn: h11.Connection, request: h11.Request, body: bytes) -> bool:
        """Send the allowed request upstream, rewritten; stream the reply back. True: keep serving."""
        tap = self.tap_factory() if self.tap_factory else None
        kept = [(n, v) for n, v in request.headers if n in _PASSED or n.startswith(_PASSED_PREFIX)]
        headers = [(b"Host", self.host_header), *kept, *self.added,
                   (b"Content-Length", b"%d" % len(body)), (b"Connection", b"close")]
        if tap is not None:  # what the session sent, as forwarded, without the host's key
            tap.request(b"%s %s HTTP/1.1\r\n" % (request.method, request.target)
                        + b"".join(b"%s: %s\r\n" % pair for pair in kept) + b"\r\n" + body)
        started = False
        try:
            upstream = socket.create_connection(self.endpoint, timeout=CONNECT_TIMEOUT_S)
        except OSError:
            self._answer_failure(client, conn, tap, "could not reach the model endpoint")
            return False
        try:
            upstream.settimeout(IDLE_TIMEOUT_S)
            out = h11.Connection(h11.CLIENT)
            upstream.sendall(out.send(h11.Request(method=request.method, target=request.target, headers=headers))
                             + out.send(h11.Data(data=body)) + out.send(h11.EndOfMessage()))
            while True:
                event = out.next_event()
                if event is h11.NEED_DATA:
                    out.receive_data(upstream.recv(CHUNK_BYTES))
                    continue
                if isinstance(event, h11.InformationalResponse):
                    continue
                if isinstance(event, h11.Response):
                    headers = [(n, v) for n, v in event.headers if n not in _HOP]
                    sent = conn.send(h11.Response(status_code=event.status_code, headers=headers, reason=event.reason))
                    started = True
                elif isinstance(event, h11.Data):
                    sent = conn.send(h11.Data(data=event.data))
                elif isinstance(event, h11.EndOfMessage):
                    sent = conn.send(h11.EndOfMessage())
                else:
                    raise h11.RemoteProtocolError("the model endpoint closed before its reply ended")
                client.sendall(sent)
                if tap is not None:
                    tap.response(sent)
                if isinstance(event, h11.EndOfMessage):
                    break
        except (OSError, h11.ProtocolError):
            if not started:
                self._answer_failure(client, conn, tap, "got no well-formed reply from the model endpoint")
            elif tap is not None:
                tap.close()
            return False  # a reply cut short: the session sees its connection end
        finally:
            upstream.close()
        if tap is not None:
            tap.close()
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE

    def _answer_failure(self, client: socket.socket, conn: h11.Connection, tap: Tap | None, what: str) -> None:
        body = f"veriscale's model relay {what}.\n".encode()
        try:
            sent = conn.send(h11.Response(status_code=502, headers=[(b"Content-Type", b"text/plain; charset=utf-8"),
                                                                    (b"Content-Length", b"%d" % len(body)),
                                                                    (b"Connection", b"close")]))
            sent += conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
            client.sendall(sent)
        except (OSError, h11.ProtocolError):
            sent = b""
        if tap is not None:
            tap.response(sent)
            tap.close()
