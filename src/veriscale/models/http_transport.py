"""HTTP with retries for one server: a blocking client, one async client per event loop, and the
rule for what is worth another try.

429, 5xx, timeouts, dropped connections and a body that is not JSON are tried again with
exponential backoff (a ``Retry-After`` header on 429/503 sets the wait, at most
``MAX_RETRY_AFTER_S``); what still fails is a ``ModelCallError``; a prompt the server refuses as
too long raises ``ContextOverflow`` and tells the subclass the context it learned::

    class Backend(HttpTransport): ...
    data = backend._post("/completions", body)           # blocking
    data = await backend._apost("/completions", body)    # on the running loop; cancelling cancels it
    backend.close()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ssl
import threading
import weakref
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from veriscale.errors import ModelCallError
from veriscale.models.context import overflow_error, read_overflow

#: The longest ``Retry-After`` honoured; a server asking for more gets this.
MAX_RETRY_AFTER_S = 60.0


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, (_Retryable, httpx.TimeoutException, httpx.TransportError))


def _retry_after(resp: httpx.Response) -> float | None:
    raw = resp.headers.get("retry-after")
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(raw))) if raw is not None else None
    except ValueError:
        return None




class RequestCount:
    """A count of requests, shared by copies of a backend (thread-safe)."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self, url: str, what: str) -> None:
        if what in url:
            with self._lock:
                self.value += 1


def _nameless(exc: BaseException | None) -> str:
    """The reason of a failure whose exception carries no message (a reset connection's ReadError)."""
    if isinstance(exc, (httpx.ReadError, httpx.RemoteProtocolError)):
        return f"the server closed the connection without a reply ({type(exc).__name__})"
    if isinstance(exc, httpx.TransportError):
        return f"the connection failed ({type(exc).__name__})"
    return type(exc).__name__ if exc is not None else "no reason given"


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


_SSL_CONTEXT: ssl.SSLContext | None = None
_SSL_LOCK = threading.Lock()


def shared_ssl_context() -> ssl.SSLContext:
    """One TLS context for every client of the process (httpx builds one per client otherwise, loading
    the CA bundle each time: ~30 ms a client, paid per decision by a Ray worker). Built the way httpx
    builds its default (its SSL_CERT_FILE / SSL_CERT_DIR), certifi's bundle where httpx is older."""
    global _SSL_CONTEXT
    with _SSL_LOCK:
        if _SSL_CONTEXT is None:
            make = getattr(httpx, "create_ssl_context", None)
            if make is not None:
                _SSL_CONTEXT = make()
            else:
                import certifi

                _SSL_CONTEXT = ssl.create_default_context(cafile=certifi.where())
        return _SSL_CONTEXT


class HttpTransport:
    """The HTTP side of a backend on one server (``base_url``); ``display_name`` names it in errors."""

    base_url: str
    display_name: str

    def __init__(self, base_url: str, *, api_key: str | None, timeout_s: float, max_retries: int, backoff_s: float,
                 max_connections: int) -> None:
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = httpx.Timeout(timeout_s, connect=10.0)
        self._limits = httpx.Limits(max_connections=max_connections)
        self._client = httpx.Client(timeout=self._timeout, headers=self._headers, limits=self._limits,
                                    verify=shared_ssl_context())
        self._aclients: dict[int, tuple[Any, httpx.AsyncClient]] = {}
        self._lock = threading.Lock()
        _TRANSPORTS.add(self)
        self.tokenize_posts = RequestCount()  # probe posts to a tokenizer route (a label check), for the cost

    def _learned_context(self, context: int | None) -> None:
        """What a too-long-prompt reply said the server's context is (a subclass keeps it)."""

    def _answer(self, url: str, resp: httpx.Response) -> dict[str, Any]:
        """The JSON body of a response, or the error it stands for (retryable or not)."""
        if resp.status_code == 429 or resp.status_code >= 500:
            raise _Retryable(f"HTTP {resp.status_code} from {url}", _retry_after(resp))
        if resp.status_code >= 400:
            detail = resp.text[:300].replace("\n", " ")
            if (overflow := read_overflow(resp.status_code, resp.text)) is not None:
                self._learned_context(overflow.context)
                raise overflow_error(overflow, self.display_name, detail)
            raise ModelCallError(f"{url} answered HTTP {resp.status_code}: {detail}")
        try:
            data: dict[str, Any] = resp.json()
        except ValueError:
            raise _Retryable(f"{url} answered with a body that is not JSON") from None
        return data

    def _retry_policy(self) -> dict[str, Any]:
        backoff = wait_exponential_jitter(multiplier=self.backoff_s, max=20.0)

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            after = getattr(exc, "retry_after", None)
            return after if after is not None else backoff(state)

        return {"stop": stop_after_attempt(self.max_retries + 1), "reraise": False, "wait": wait,
                "retry": retry_if_exception(_is_retryable)}

    def _failure(self, url: str, exc: RetryError) -> ModelCallError:
        last = exc.last_attempt.exception()
        if isinstance(last, httpx.ConnectError):
            return ModelCallError(f"cannot reach {url} after {self.max_retries + 1} tries: is the server running?", retryable=True)
        what = "timed out" if isinstance(last, httpx.TimeoutException) else (str(last).strip() or _nameless(last))
        return ModelCallError(f"model call failed after {self.max_retries + 1} tries: {what}", retryable=True)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        try:
            for tries in Retrying(**self._retry_policy()):
                with tries:
                    resp = self._client.post(url, json=body)
                    return self._answer(url, resp)
        except RetryError as exc:
            raise self._failure(url, exc) from None
        raise AssertionError("unreachable")

    async def _sync_post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._post(path, body)

    async def _sync_get(self, url: str, timeout: float) -> httpx.Response:
        return self._client.get(url, timeout=timeout)

    async def _sync_probe(self, url: str, body: dict[str, Any]) -> httpx.Response:
        self.tokenize_posts.add(url, "tokenize")
        return self._client.post(url, json=body, timeout=10.0)

    def _async_client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        with self._lock:
            found = self._aclients.get(id(loop))
            if found is None or found[0] is not loop:
                for key in [k for k, (other, _) in self._aclients.items() if other.is_closed()]:
                    del self._aclients[key]  # a loop that ended without closing its client
                found = (loop, httpx.AsyncClient(timeout=self._timeout, headers=self._headers, limits=self._limits,
                                                 verify=shared_ssl_context()))
                self._aclients[id(loop)] = found
        return found[1]

    async def aclose_loop_client(self) -> None:
        """Close the async client of the running loop, if this loop opened one (the rest stay open)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            found = self._aclients.get(id(loop))
            if found is None or found[0] is not loop:
                return
            del self._aclients[id(loop)]
        await found[1].aclose()

    async def _aget(self, url: str, timeout: float) -> httpx.Response:
        return await self._async_client().get(url, timeout=timeout)

    async def _aprobe(self, url: str, body: dict[str, Any]) -> httpx.Response:
        self.tokenize_posts.add(url, "tokenize")
        return await self._async_client().post(url, json=body, timeout=10.0)

    async def _apost(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        client = self._async_client()
        try:
            async for tries in AsyncRetrying(**self._retry_policy()):
                with tries:
                    resp = await client.post(url, json=body)
                    return self._answer(url, resp)
        except RetryError as exc:
            raise self._failure(url, exc) from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the HTTP clients (async ones on their own loops, where those still run)."""
        self._client.close()
        with self._lock:
            clients, self._aclients = list(self._aclients.values()), {}
        current = asyncio.get_running_loop() if _on_event_loop() else None
        for loop, client in clients:
            if loop.is_closed() or loop is current:  # on its own loop only aclose() can wait for it
                continue
            if loop.is_running():
                try:
                    asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=30)
                except (RuntimeError, TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError):
                    pass
            else:
                loop.run_until_complete(client.aclose())

    async def aclose(self) -> None:
        """Close the HTTP clients from the running loop (the others as :meth:`close` does)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            mine = self._aclients.pop(id(loop), None)
        if mine is not None and mine[0] is loop:
            await mine[1].aclose()
        await asyncio.to_thread(self.close)


_TRANSPORTS: "weakref.WeakSet[HttpTransport]" = weakref.WeakSet()


async def close_loop_clients() -> None:
    """Close every HTTP backend's async client opened on the running loop: the last step of a
    synchronous call (:mod:`veriscale.engine.sync_edge`), whose loop ends with it."""
    for transport in list(_TRANSPORTS):
        await transport.aclose_loop_client()


__all__ = ["MAX_RETRY_AFTER_S", "HttpTransport", "close_loop_clients"]
