"""The jail's only way out: a host-side forward from a unix socket to the model endpoint.

A jailed session has its own network namespace with loopback only. The runner opens a
:class:`ModelForward` on the host and hands the jail's launcher one end of a socket pair, the
broker (nothing is bind-mounted, so no host path shows inside); ``jail_relay.py`` listens on
``127.0.0.1:<port>`` inside and, per client, asks the broker for a fresh connection (one byte
out, one descriptor back by ``SCM_RIGHTS``) that the host relays like an accepted one. Nothing
else on the host network, loopback included, is reachable from inside::

    with ModelForward(("127.0.0.1", 8000)) as forward:
        fd = forward.broker_fd()   # pass to the jail, close here once it started
        forward.socket_path        # the same forward on a host unix socket (host-side clients)
    inside_model_url(("127.0.0.1", 8000))   # 'http://127.0.0.1:8000' as seen from the jail

The forward is plain TCP: an HTTPS endpoint whose certificate names a host other than
127.0.0.1 fails verification inside; point the jail at a plain-HTTP local server or proxy.

At most ``max_connections`` relays are open at once (more are closed on arrival). With a
``policy`` every request passes the host's :class:`~veriscale.harness.jail.relay_gate.RelayGate`:
parsed strictly one at a time, refused with a 403 unless it is a model call the policy allows,
and forwarded rewritten, ``headers`` (the API key, which never enters the jail) added to allowed
requests only. Without a policy the forward relays bytes and cannot carry headers::

    policy = RelayPolicy.for_api("/v1", model="qwen3")
    ModelForward(("127.0.0.1", 8000), policy=policy, headers={"Authorization": "Bearer sk-..."})
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from veriscale.errors import UserError
from veriscale.harness.jail.jail_relay import Tap, serve_forever
from veriscale.harness.jail.relay_gate import CONNECT_TIMEOUT_S, RelayGate, RelayPolicy

Endpoint = tuple[str, int]

#: Port the in-jail relay uses when the endpoint's own port is privileged (< 1024).
FALLBACK_INSIDE_PORT = 8080
DEFAULT_MAX_CONNECTIONS = 16


def check_endpoint(endpoint: Endpoint) -> Endpoint:
    """Return ``endpoint`` as ``(host, port)`` or raise UserError naming what is wrong with it."""
    try:
        host, port = endpoint
    except (TypeError, ValueError):
        raise UserError(
            f"model endpoint {endpoint!r} is not a (host, port) pair: pass e.g. ('127.0.0.1', 8000)"
        ) from None
    if not isinstance(host, str) or not host:
        raise UserError(f"model endpoint host {host!r} is empty: pass a host name or IP address")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise UserError(f"model endpoint port {port!r} is not in 1..65535: pass the server's port")
    return host, port


def inside_port(endpoint: Endpoint) -> int:
    """The port the session connects to inside the jail: the endpoint's own, unless privileged."""
    port = check_endpoint(endpoint)[1]
    return port if port >= 1024 else FALLBACK_INSIDE_PORT


def inside_model_url(endpoint: Endpoint) -> str:
    """Base URL (``http://127.0.0.1:<port>``) at which a jailed session reaches ``endpoint``."""
    return f"http://127.0.0.1:{inside_port(endpoint)}"


class ModelForward:
    """Host-side listener on a private unix socket that relays each connection to one endpoint.

    Use as a context manager; leaving it stops accepting, and removes the socket and its folder.
    """

    def __init__(self, endpoint: Endpoint, *, headers: Mapping[str, str] | None = None,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, tap_factory: Callable[[], Tap] | None = None,
                 policy: RelayPolicy | None = None) -> None:
        self.endpoint = check_endpoint(endpoint)
        self.headers = dict(headers or {})
        if self.headers and policy is None:
            raise ValueError("ModelForward headers (an API key) need a policy naming the requests that may carry them")
        self.gate = RelayGate(self.endpoint, policy, headers=self.headers, tap_factory=tap_factory) if policy else None
        self.tap_factory = tap_factory
        self.max_connections = max_connections
        self._folder: Path | None = None
        self._listener: socket.socket | None = None
        self._brokers: list[socket.socket] = []

    @property
    def socket_path(self) -> Path:
        """The unix socket to bind into the jail (valid while the forward is open)."""
        if self._folder is None:
            raise RuntimeError("ModelForward.socket_path read before the forward was opened")
        return self._folder / "model.sock"

    def _connect_endpoint(self) -> socket.socket:
        upstream = socket.create_connection(self.endpoint, timeout=CONNECT_TIMEOUT_S)
        upstream.settimeout(None)
        return upstream

    def _prepare(self, client: socket.socket, upstream: socket.socket) -> bool | Tap:
        """Attach a recording tap to a plain byte relay (no policy: no rewrite, no headers)."""
        return self.tap_factory() if self.tap_factory else True

    def __enter__(self) -> "ModelForward":
        self._folder = Path(tempfile.mkdtemp(prefix="veriscale-forward-"))
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o666)  # a session's own host uid connects (its folder stays 0700)
        listener.listen(64)
        self._listener = listener
        prepare = self._prepare if self.tap_factory else None
        handle = self.gate.handle if self.gate is not None else None
        threading.Thread(
            target=serve_forever, args=(listener, self._connect_endpoint),
            kwargs={"max_connections": self.max_connections, "prepare": prepare, "handle": handle}, daemon=True,
        ).start()
        return self

    def broker_fd(self) -> int:
        """A descriptor for the jail: each byte written to it is answered with one fresh connection
        to this forward (an ``SCM_RIGHTS`` message); the caller closes its copy after passing it on."""
        if self._listener is None:
            raise RuntimeError("ModelForward.broker_fd called before the forward was opened")
        host, jail = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._brokers.append(host)
        prepare = self._prepare if self.tap_factory else None
        handle = self.gate.handle if self.gate is not None else None
        threading.Thread(
            target=serve_forever, args=(_Broker(host), self._connect_endpoint),
            kwargs={"max_connections": self.max_connections, "prepare": prepare, "handle": handle}, daemon=True,
        ).start()
        return jail.detach()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        for broker in self._brokers:
            try:
                broker.shutdown(socket.SHUT_RDWR)  # wakes the broker's blocked recv()
            except OSError:
                pass
            broker.close()
        self._brokers = []
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


class _Broker:
    """A listener lookalike for ``serve_forever``: each byte the jail sends on ``control`` is
    answered with one end of a fresh socket pair; the other end is "accepted" here."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control

    def accept(self) -> tuple[socket.socket, None]:
        if not self.control.recv(1):
            raise OSError("the jail closed its broker")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            socket.send_fds(self.control, [b"c"], [theirs.fileno()])
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        return ours, None
