"""Byte relay between two sockets, used on both sides of the jail's only way out.

This file must stay standard-library only: the jail runs it (imported by ``jail_inside.py``)
with the host's interpreter, without veriscale importable. Inside the jail it listens on
``127.0.0.1:<port>`` and relays each connection to the host's forward over a bind-mounted unix
socket; on the host, ``veriscale.harness.jail.netjail`` uses the same functions with a cap on open
connections, and hands each connection to its strict request gate when a policy is set::

    serve_forever(listener, connect, max_connections=16, prepare=None)
    serve_forever(listener, None, max_connections=16, handle=gate.handle)   # the host's strict gate
"""

from __future__ import annotations

import socket
import threading
from typing import Callable, Optional

CHUNK_BYTES = 65536
#: A relayed connection that moves no byte for this long is closed.
IDLE_TIMEOUT_S = 600.0

class Tap:
    """Sees a relayed connection's bytes (the host records model calls with one)."""

    def request(self, data: bytes) -> None:
        pass

    def response(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


#: ``prepare(client, upstream)`` -> False to drop the connection, True to relay it, or a Tap.
Prepare = Callable[[socket.socket, socket.socket], "bool | Tap"]


def _pump(source: socket.socket, sink: socket.socket, seen: Optional[Callable[[bytes], None]] = None) -> None:
    """Copy bytes from ``source`` to ``sink`` until EOF, then half-close ``sink``."""
    try:
        while data := source.recv(CHUNK_BYTES):
            sink.sendall(data)
            if seen is not None:
                seen(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def splice(left: socket.socket, right: socket.socket, tap: Optional["Tap"] = None) -> None:
    """Relay bytes both ways between two connected sockets until both sides finish; close them.

    A ``tap`` sees the bytes going right (``request``) and left (``response``), then ``close()``.
    """
    backward = threading.Thread(target=_pump, args=(right, left, tap.response if tap else None), daemon=True)
    backward.start()
    _pump(left, right, tap.request if tap else None)
    backward.join()
    left.close()
    right.close()
    if tap is not None:
        tap.close()


def serve_forever(listener: socket.socket, connect: Optional[Callable[[], socket.socket]], *,
                  max_connections: int = 0, prepare: Optional[Prepare] = None,
                  handle: Optional[Callable[[socket.socket], None]] = None) -> None:
    """Accept on ``listener``; relay each client to a fresh ``connect()`` until it is shut down.

    With ``max_connections`` > 0 a client beyond that many open relays is closed at once, so a
    session cannot make the host start threads without bound. ``prepare(client, upstream)`` may
    look at the stream first; it returns False to drop the connection. ``handle(client)``
    instead of ``connect`` serves the whole connection itself (and closes it).
    """
    slots = threading.BoundedSemaphore(max_connections) if max_connections > 0 else None
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        if slots is not None and not slots.acquire(blocking=False):
            client.close()
            continue
        try:
            threading.Thread(target=_relay_client, args=(client, connect, slots, prepare, handle), daemon=True).start()
        except RuntimeError:  # no thread to be had (a process limit): refuse this client, keep serving
            client.close()
            if slots is not None:
                slots.release()


def _relay_client(client: socket.socket, connect: Optional[Callable[[], socket.socket]],
                  slots: Optional[threading.BoundedSemaphore], prepare: Optional[Prepare],
                  handle: Optional[Callable[[socket.socket], None]] = None) -> None:
    try:
        client.settimeout(IDLE_TIMEOUT_S)
        if handle is not None:
            handle(client)
            client.close()
            return
        try:
            upstream = connect()  # type: ignore[misc] - serve_forever takes connect or handle
        except OSError:
            client.close()
            return
        upstream.settimeout(IDLE_TIMEOUT_S)
        prepared = prepare(client, upstream) if prepare is not None else True
        if prepared is False:
            client.close()
            upstream.close()
            return
        splice(client, upstream, prepared if isinstance(prepared, Tap) else None)
    finally:
        if slots is not None:
            slots.release()


def connect_unix(path: str) -> socket.socket:
    """A stream connection to the unix socket at ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock
