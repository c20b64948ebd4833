"""The checks every request to ``veriscale serve`` passes before a route sees it.

Loopback is not a boundary against the user's own browser, so the middleware refuses:

- a ``Host`` that is not the bound address (a DNS-rebinding page calls itself ``evil.example``);
- a write (POST, PUT, PATCH, DELETE) from another origin (``Origin`` or ``Sec-Fetch-Site``
  say so), or with a body that is not JSON — a plain HTML form cannot post a job;
- a missing or wrong token when one is set (always, when bound off loopback): ``Authorization:
  Bearer …``, ``x-api-key``, or the cookie the dashboard gets from ``/?token=…``;
- a body over the limit (413), counted as it arrives, not trusted from ``Content-Length``.

Every answer carries ``Content-Security-Policy: default-src 'self'`` and friends::

    app.add_middleware(Guard, policy=AccessPolicy.for_bind("127.0.0.1", 8765, token=None))
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

TOKEN_COOKIE = "veriscale_token"
CSP = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class AccessPolicy:
    """Which hosts, origins and token a server accepts."""

    hosts: frozenset[str]
    token: str | None = None
    max_body_bytes: int = 1 << 20
    origins: frozenset[str] = field(default_factory=frozenset)
    any_host: bool = False  # bound to every interface: its names are unknown, and the token guards it

    @classmethod
    def for_bind(cls, host: str, port: int, *, token: str | None, max_body_bytes: int = 1 << 20,
                 extra_hosts: tuple[str, ...] = ()) -> "AccessPolicy":
        names = {host, *extra_hosts}
        if is_loopback(host):
            names |= {"localhost", "127.0.0.1", "[::1]"}
        if ":" in host and not host.startswith("["):
            names.add(f"[{host}]")
        hosts = {h for n in names for h in (n.lower(), f"{n.lower()}:{port}")}
        origins = {f"{scheme}://{n.lower()}:{port}" for n in names for scheme in ("http", "https")}
        wildcard = host in ("0.0.0.0", "::", "")
        if wildcard and token is None:
            raise ValueError("a server bound to every interface needs a token")
        return cls(frozenset(hosts), token, max_body_bytes, frozenset(origins), any_host=wildcard)

    def same_origin(self, origin: str, host: str) -> bool:
        """An ``Origin`` this server's own pages send (for a wildcard bind: the Host it was reached by)."""
        origin = origin.lower()
        return origin in self.origins or self.any_host and origin in (f"http://{host}", f"https://{host}")

    def token_ok(self, headers: dict[str, str], cookies: dict[str, str]) -> bool:
        if self.token is None:
            return True
        want = self.token.encode()
        auth = headers.get("authorization", "")
        given = [auth[7:] if auth.lower().startswith("bearer ") else "", headers.get("x-api-key", ""),
                 cookies.get(TOKEN_COOKIE, "")]
        return any(g and hmac.compare_digest(g.encode(), want) for g in given)


def _cookies(header: str) -> dict[str, str]:
    out = {}
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name:
            out[name] = value
    return out


class Guard:
    """Pure ASGI middleware (so it can count a streamed body) applying an :class:`AccessPolicy`."""

    def __init__(self, app: Callable[..., Awaitable[None]], policy: AccessPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _send_error(send, *refusal, scope.get("path", ""))
            return
        limit = self.policy.max_body_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await _send_error(send, 413, f"the request body is over {limit} bytes: send a smaller one",
                                      scope.get("path", ""))
            return
        body_receive = receive
        if scope.get("method") in WRITE_METHODS:  # read the (small, JSON) body here, counting as it comes
            body = bytearray()
            more = True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > limit:
                    await _send_error(send, 413, f"the request body is over {limit} bytes: send a smaller one",
                                      scope.get("path", ""))
                    return
            body_receive = _replay(bytes(body), receive)

        async def secured_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, body_receive, secured_send)

    def _refusal(self, scope: dict[str, Any], headers: dict[str, str]) -> tuple[int, str] | None:
        policy = self.policy
        host = headers.get("host", "").lower()
        if host not in policy.hosts and not policy.any_host:
            return 421, (f"this server does not answer for host '{host[:100]}': open it by the address it is bound to "
                         "(a page that reaches it under another name is refused)")
        method = scope.get("method", "GET")
        if method in WRITE_METHODS:
            origin = headers.get("origin")
            site = headers.get("sec-fetch-site")
            if (origin is not None and not policy.same_origin(origin, host)) or site in ("cross-site", "same-site"):
                return 403, "cross-origin writes are refused: submit jobs from the dashboard itself or from a client"
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            body_expected = headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers
            if body_expected and kind != "application/json":
                return 415, f"the body must be JSON (Content-Type: application/json), not '{kind or 'none'}'"
        path = scope.get("path", "")
        if policy.token is not None and not _public(path, scope) and not policy.token_ok(
                headers, _cookies(headers.get("cookie", ""))):
            return 401, ("missing or wrong token: send 'Authorization: Bearer <token>' or 'x-api-key: <token>', "
                         "or open the dashboard once as /?token=<token>")
        return None


def _public(path: str, scope: dict[str, Any]) -> bool:
    """``/api/health`` (says only "ok") and the login redirect (``/?token=``, checked by its route)."""
    return path == "/api/health" or path == "/" and b"token=" in scope.get("query_string", b"")


def _replay(body: bytes, receive: Callable) -> Callable:
    """A ``receive`` that gives the already-read body once, then the client's own messages."""
    given = False

    async def replay() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def error_document(path: str, status: int, message: str) -> dict[str, Any]:
    """The error in the shape of the API the path belongs to (the proxies' clients parse their own)."""
    if path.startswith("/v1/messages"):
        kind = {401: "authentication_error", 403: "permission_error", 413: "request_too_large"}.get(
            status, "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    if path.startswith("/v1/"):
        return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                          "code": {401: "invalid_api_key"}.get(status)}}
    return {"error": message}


async def _send_error(send: Callable, status: int, message: str, path: str = "") -> None:
    body = json.dumps(error_document(path, status, message)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})
