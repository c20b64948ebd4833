"""In-flight claims on calls (table ``call_leases``): one call, one payment, across processes.

A process claims a call before it sends it; another process that wants the same call waits for
the answer instead of paying for it again, and takes the call over when the holder stops renewing
its claim (it died)::

    owner = lease_owner()
    store.claim_call(key, owner, lease_s=30)   # "mine" | "held" (another owner) | "done" (answered)
    store.renew_lease(key, owner, lease_s=30)  # while the call runs
    store.finish_call(key, owner, ...)         # put_call, then the claim is dropped
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from veriscale.engine.run_liveness import ProcessIdentity
from veriscale.engine.store_faults import GuardedConnection


def lease_owner() -> str:
    """A claim's owner: ``host:pid:token:boot_id:start``, the token fresh for every claim; boot id
    and the pid's start time let another process tell a dead owner from a live one."""
    me = ProcessIdentity.current()
    return f"{me.host}:{me.pid}:{os.urandom(6).hex()}:{me.boot_id or '-'}:{me.start if me.start is not None else '-'}"


def owner_is_dead(owner: str) -> bool:
    """True when ``owner`` (a :func:`lease_owner`) is a process of this machine and boot that no
    longer runs: its claim can be taken over at once instead of after its lease lapses. Anything
    else (another host, an older owner format, a live or unknown process) is False."""
    parts = owner.split(":")
    if len(parts) != 5 or parts[3] == "-" or not parts[1].isdigit():
        return False
    start = int(parts[4]) if parts[4].isdigit() else None
    identity = ProcessIdentity(parts[0], parts[3], int(parts[1]), start)
    return identity.same_machine() and not identity.alive()


class CallLeases:
    """The claim methods of :class:`veriscale.engine.store.Store` (its connection and lock)."""

    _conn: GuardedConnection
    _lock: threading.Lock
    put_call: Any  # the Store's

    def claim_call(self, key: str, owner: str, *, lease_s: float, fresh_after: float | None = None) -> str:
        """Claim call ``key`` for ``owner`` for ``lease_s`` seconds: ``"mine"``; ``"held"`` while
        another owner's claim is live; ``"done"`` when the call succeeded (after ``fresh_after``,
        when given: a refreshing run ignores older answers)."""
        now = time.time()
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute("SELECT created_at FROM calls WHERE key = ? AND status = 'ok'",
                                         (key,)).fetchone()
                if row is not None and (fresh_after is None or row[0] >= fresh_after):
                    state = "done"
                else:
                    lease = self._conn.execute("SELECT owner, expires_at FROM call_leases WHERE key = ?",
                                               (key,)).fetchone()
                    if lease is not None and lease[0] != owner and lease[1] > now:
                        state = "held"
                    else:
                        self._conn.execute(
                            "INSERT INTO call_leases (key, owner, expires_at, taken_at) VALUES (?, ?, ?, ?) "
                            "ON CONFLICT(key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at, "
                            "taken_at = excluded.taken_at", (key, owner, now + lease_s, now))
                        state = "mine"
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return state

    def lease(self, key: str) -> dict[str, Any] | None:
        """The live or lapsed claim on ``key`` (owner, expires_at, taken_at), or None."""
        with self._lock:
            row = self._conn.execute("SELECT owner, expires_at, taken_at FROM call_leases WHERE key = ?",
                                     (key,)).fetchone()
        return dict(zip(("owner", "expires_at", "taken_at"), row)) if row else None

    def renew_lease(self, key: str, owner: str, *, lease_s: float) -> bool:
        """Extend ``owner``'s claim on ``key``; False when it has none any more (it expired and was taken)."""
        with self._lock:
            cur = self._conn.execute("UPDATE call_leases SET expires_at = ? WHERE key = ? AND owner = ?",
                                     (time.time() + lease_s, key, owner))
        return cur.rowcount > 0

    def release_lease(self, key: str, owner: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM call_leases WHERE key = ? AND owner = ?", (key, owner))

    def finish_call(self, key: str, owner: str | None, **outcome: Any) -> None:
        """Commit a claimed call's outcome (:meth:`put_call`), then drop ``owner``'s claim."""
        self.put_call(key, **outcome)
        if owner is not None:
            self.release_lease(key, owner)
