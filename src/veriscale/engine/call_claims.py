"""A gateway's claims on the calls it sends (one call, one payment, across processes).

Before a call is sent its key is claimed in the store (:mod:`veriscale.engine.call_leases`); the
claim is renewed while the call runs. A process that finds the key held by a live owner waits
for that owner's answer, and takes the call over once the claim lapses (the owner died)::

    claims = CallClaims(store, io, lease_s=30)
    state, owner = await claims.claim(key)       # "mine" (owner set), "done" or "held"
    await claims.wait_unclaimed(key)             # "held": until the other owner is gone
    renewer = asyncio.ensure_future(claims.renew(key, owner))
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from veriscale.engine.call_leases import lease_owner, owner_is_dead

#: Seconds a claim on a call lives without renewal (renewed every third of it while the call runs).
LEASE_S = 30.0
#: How often a process waiting on another's claim looks again (seconds, growing to the second value).
POLL_S = (0.05, 1.0)


class CallClaims:
    """Claims in ``store`` through ``io`` (the store's writer thread, as the gateway awaits it)."""

    def __init__(self, store: Any, io: Callable[..., Awaitable[Any]], lease_s: float = LEASE_S) -> None:
        self.store = store
        self.io = io
        self.lease_s = lease_s

    async def claim(self, key: str, fresh_after: float | None = None) -> tuple[str, str | None]:
        """``("mine", owner)``, ``("done", None)`` or ``("held", None)`` (another live owner has it);
        ``fresh_after``: an answer older than this does not count as done (a refreshing run)."""
        if self.store is None:
            return "mine", None
        owner = lease_owner()
        state = await self.io(self.store.claim_call, key, owner, lease_s=self.lease_s, fresh_after=fresh_after)
        return state, owner if state == "mine" else None

    async def wait_unclaimed(self, key: str) -> None:
        """Wait while another owner's claim on ``key`` is live; a claim whose owner is a dead
        process of this machine is dropped at once (a killed run's rerun does not wait out its lease)."""
        delay = POLL_S[0]
        while True:
            await asyncio.sleep(delay)
            delay = min(POLL_S[1], delay * 1.5)
            record = await self.io(self.store.lease, key)
            if record is None or record["expires_at"] <= time.time():
                return
            if owner_is_dead(record["owner"]):
                await self.io(self.store.release_lease, key, record["owner"])
                return

    async def renew(self, key: str, owner: str | None) -> None:
        """Keep ``owner``'s claim on ``key`` alive until cancelled (nothing when there is no claim)."""
        if owner is None:
            return
        while True:
            await asyncio.sleep(self.lease_s / 3)
            await self.io(self.store.renew_lease, key, owner, lease_s=self.lease_s)
