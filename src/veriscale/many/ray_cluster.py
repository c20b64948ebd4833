"""Joining a Ray cluster, one way for every command that runs on one: an address nothing answers at
is one sentence before any work (Ray itself would retry for a minute), and so is a cluster Ray
cannot join. ``drop`` is the flag the sentence tells the user to drop::

    join("10.0.0.5:6379", drop=setting("executor", "ray"))   # select-many, bench, track, harness run
    join(None, drop=setting("ray"))                          # serve-reward --ray: a local instance
"""

from __future__ import annotations

import socket
from typing import Any

from veriscale.errors import UserError, one_line, setting

LOCAL = (None, "", "auto", "local")  # a local instance (or one this machine already runs): nothing to reach


def reachable(address: str | None, *, drop: str, timeout_s: float = 5.0) -> None:
    """One sentence when ``address`` is not HOST:PORT or no process listens there."""
    if address in LOCAL:
        return
    assert address is not None
    where = address.split("://", 1)[-1]
    host, _, port = where.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"{setting('address', repr(address))} is not HOST:PORT (or ray://HOST:PORT): give the head "
                        "node's address, e.g. 10.0.0.5:6379")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise UserError(f"nothing answers at {setting('address', address)} ({exc.strerror or exc}): start the cluster "
                        f"with 'ray start' on its head node, check the address, or drop {drop}") from None


def join(address: str | None, *, drop: str, runtime_env: dict[str, Any] | None = None) -> None:
    """Join the cluster at ``address`` (None: start a local instance), unless this process already has."""
    try:
        import ray
    except ImportError:
        raise UserError(f"{drop} needs Ray: pip install 'veriscale[ray]'") from None
    reachable(address, drop=drop)
    if ray.is_initialized():
        return
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env,
                 configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UserError(f"cannot reach the Ray cluster at {address or 'a local instance'} ({one_line(str(exc))[:200]}): "
                        f"start it with 'ray start' on its head node, give its address with {setting('address')}, or "
                        f"drop {drop}") from None
