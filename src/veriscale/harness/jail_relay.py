"""Byte relay between two sockets, and the in-jail launcher that serves the model endpoint.

This file must stay standard-library only: the jail runs it as a script with the host's
interpreter, without veriscale importable. Inside the jail it listens on
``127.0.0.1:<port>``, relays each connection to the host's forward over a bind-mounted unix
socket, and runs the session's command as its child::

    python3 -I jail_relay.py /run/veriscale/model.sock 8000 -- agent --model http://127.0.0.1:8000

It exits with the command's return code (``128 + N`` when signal N ended it). On the host,
``veriscale.harness.netjail`` imports :func:`splice` from here so both ends relay the same way.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from typing import Callable

CHUNK_BYTES = 65536


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes from ``source`` to ``sink`` until EOF, then half-close ``sink``."""
    try:
        while data := source.recv(CHUNK_BYTES):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def splice(left: socket.socket, right: socket.socket) -> None:
    """Relay bytes both ways between two connected sockets until both sides finish; close them."""
    backward = threading.Thread(target=_pump, args=(right, left), daemon=True)
    backward.start()
    _pump(left, right)
    backward.join()
    left.close()
    right.close()


def serve_forever(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Accept on ``listener``; relay each client to a fresh ``connect()`` until it is shut down."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_relay_client, args=(client, connect), daemon=True).start()


def _relay_client(client: socket.socket, connect: Callable[[], socket.socket]) -> None:
    try:
        upstream = connect()
    except OSError:
        client.close()
        return
    splice(client, upstream)


def _connect_unix(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock


def main(args: list[str]) -> int:
    """Run ``<unix socket> <port> -- <command...>``; return the command's exit code."""
    if len(args) < 4 or args[2] != "--":
        print("usage: jail_relay.py <unix socket> <port> -- <command...>", file=sys.stderr)
        return 2
    unix_path, port, command = args[0], int(args[1]), args[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(
        target=serve_forever, args=(listener, lambda: _connect_unix(unix_path)), daemon=True
    ).start()
    try:
        returncode = subprocess.call(command)
    except OSError as exc:
        print(f"jail: cannot run {command[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127
    return 128 - returncode if returncode < 0 else returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
