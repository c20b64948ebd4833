"""``select-many --batch``: the model calls of every decision sent as OpenAI Batch API batches.

    report = select_many_batched(jobs, verifier=v, settings=s, picks=PicksFile(out), ledger=out_ledger(out))

The tournaments are adaptive (a round depends on the last), so the run goes in waves: every
decision runs at once; each completion request a backend sends (``/chat/completions``,
``/completions``; tokenizer and probe requests go out as usual) waits in the collector, and a wave of
them goes out as one batch per endpoint (:mod:`veriscale.many.batch_client`). Each reply comes back
to the backend's own reading (the transport's status handling, then its logprob parsing), so a
batched call gives the probabilities a direct call would, and the gateway commits it to the store's
call cache as it commits any call.

The ledger is :mod:`veriscale.many.batch_ledger`.

The wave rule (no timer): a wave goes out when every running decision has a request waiting (in
the collector or in a batch in flight), after a settle round in which no request joined. A settle
round is one round trip through the store's writer thread and one turn of the event loop, so the
sibling requests of a decision whose calls are being claimed in the store join the same wave. A
decision waiting on something else (another decision's call, a rate limit) cannot hold the
others: after :data:`IDLE_ROUNDS` settle rounds with nothing joining, the wave goes anyway.

Restarts. Each batch is written to the ledger (``picks.jsonl.batches``, next to the picks it
serves) before it is polled: its id, endpoint and the ``custom_id`` of each request (a digest of
the request itself). A rerun first polls every recorded batch to its end and keeps the replies;
the decisions then run again, their answered calls come from the store, and a request whose reply
a recorded batch holds is served from it, never sent again. A run that ends (every task has its
line) removes the ledger. A batch that fails, expires or is cancelled fails the calls it did not
answer, so their tasks get an ``error`` line (a rerun asks them again).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from veriscale.engine import sync_edge
from veriscale.errors import ModelCallError, one_line
from veriscale.many.batch_client import BatchApi, BatchState, api_key_of, http_backends
from veriscale.many.batch_ledger import BatchLedger, request_id
from veriscale.many.decisions import DecisionJob
from veriscale.many.executors import LocalExecutor
from veriscale.many.picks_file import PickRecord
from veriscale.many.select_many import ManyReport, aselect_many
from veriscale.selection.settings import SelectionSettings

#: the backend paths whose requests go into batches (the Batch API's endpoints are these under /v1)
BATCHED = ("/chat/completions", "/completions")
#: settle rounds with nothing joining after which a wave goes even if some decision has no request waiting
IDLE_ROUNDS = 20
#: requests in one batch at most (the OpenAI Batch API's limit)
MAX_LINES = 50_000
#: calls that may wait in batches at once when the command gives no --concurrency
BATCH_CONCURRENCY = 1024

_DECISION: contextvars.ContextVar[str | None] = contextvars.ContextVar("veriscale_batch_decision", default=None)


@dataclass(eq=False)
class _Waiting:
    """One request waiting for its wave: where it goes, what it sends, the future its reply settles."""

    cid: str
    api: BatchApi
    path: str
    body: dict[str, Any]
    future: asyncio.Future[dict[str, Any]]


def _answer(backend: Any, url: str, line: dict[str, Any]) -> dict[str, Any]:
    """An output line's reply as the backend's transport reads a reply (its status handling, its errors)."""
    response = line.get("response")
    if not isinstance(response, dict):
        error = line.get("error") or {}
        raise ModelCallError(f"{url} failed in a batch: {error.get('code') or 'error'}: "
                             f"{one_line(str(error.get('message') or 'no reason given'))[:300]}")
    answered: dict[str, Any] = backend._answer(url, httpx.Response(int(response.get("status_code") or 200),
                                                                   json=response.get("body")))
    return answered


def _retryable(exc: Exception) -> bool:
    from veriscale.models.http_transport import _Retryable

    return isinstance(exc, _Retryable)


class BatchSession:
    """The collector of one run: hooks the verifier's HTTP backends, gathers their requests in waves,
    sends each wave as batches, and serves the replies of recorded batches (module docstring)."""

    def __init__(self, ledger: Path, *, api_key: str | None = None,
                 poll_s: tuple[float, float] | None = None, whole_pool: bool = True) -> None:
        self.ledger = BatchLedger(ledger)
        self.whole_pool = whole_pool
        self.api_key, self.poll_s = api_key, poll_s
        self.apis: dict[str, BatchApi] = {}
        self.recovered: dict[str, dict[str, Any]] = {}  # custom_id -> output line of a recorded batch
        self.recovered_batches: list[str] = []
        self._replies_of: dict[str, set[str]] = {}  # recorded batch -> the custom_ids it answered
        self._handled: set[str] = set()  # recorded batches read back, or found unreadable
        self.submitted: list[str] = []  # batch ids this run created
        self.waves = 0
        self.notes: list[str] = []
        self._store: Any = None
        self._pending: list[_Waiting] = []
        self._waiting: dict[str, _Waiting] = {}
        self._running: Counter[str | None] = Counter()  # decisions running
        self._waits: Counter[str | None] = Counter()  # requests each decision waits on
        self._version = 0
        self._watcher: asyncio.Task[None] | None = None
        self._flights: set[asyncio.Task[None]] = set()
        self._hooked: list[Any] = []
        self._ready: asyncio.Task[None] | None = None

    # -- setting up: probe, hook, recover ----------------------------------------------------
    async def ready(self, verifier: Any) -> None:
        """Set up once (every decision awaits the same set-up)."""
        if self._ready is None:
            self._ready = asyncio.ensure_future(self._setup(verifier))
        await asyncio.shield(self._ready)

    async def _setup(self, verifier: Any) -> None:
        self._store = verifier.executor.store
        backends = http_backends(verifier.model)
        for backend in backends:
            if any(backend is hooked for hooked in self._hooked):
                continue
            await backend.aread_plan()  # the read probe goes out as direct requests, before the hook
            await backend.amodel_id()
            api = self.apis.get(backend.base_url)
            if api is None:
                api = self.apis[backend.base_url] = BatchApi(backend.base_url, api_key=api_key_of(backend, self.api_key),
                                                            **({"poll_s": self.poll_s} if self.poll_s else {}))
            real = backend._apost

            async def post(path: str, body: dict[str, Any], _b: Any = backend, _real: Any = real,
                           _api: BatchApi = api) -> dict[str, Any]:
                return await self.post(_b, _api, _real, path, body)

            backend._apost = post
            self._hooked.append(backend)
        await self._recover()

    async def _recover(self) -> None:
        """Poll every batch the ledger records to its end and keep the replies it gave."""
        for entry in self.ledger.entries():
            api = self.apis.get(entry.get("base_url", ""))
            if api is None:  # another endpoint's (the model changed): kept for a run on that one
                continue
            self._handled.add(entry["batch"])
            try:
                state = await api.wait(entry["batch"])
                lines = await api.replies(state)
            except Exception as exc:  # noqa: BLE001 - an unreadable batch: its calls are asked again
                self.notes.append(f"the recorded batch {entry['batch']} could not be read back "
                                  f"({one_line(str(exc))[:200]}): its calls are asked again")
                continue
            self.recovered_batches.append(entry["batch"])
            answered = {cid: line for cid, line in lines.items() if isinstance(line.get("response"), dict)}
            self.recovered.update(answered)
            self._replies_of[entry["batch"]] = set(answered)

    # -- the hooked post --------------------------------------------------------------------
    async def post(self, backend: Any, api: BatchApi, real: Callable[..., Any], path: str,
                   body: dict[str, Any]) -> dict[str, Any]:
        """What the backend's ``_apost`` became: completion requests through batches, the rest direct."""
        if path not in BATCHED:
            answered: dict[str, Any] = await real(path, body)
            return answered
        url, cid = f"{backend.base_url}{path}", request_id(backend.base_url, path, body)
        last: Exception | None = None
        for attempt in range(backend.max_retries + 1):
            line = self.recovered.pop(cid, None) if attempt == 0 else None
            if line is None:
                line = await self._join(api, cid, path, body)
            try:
                return _answer(backend, url, line)
            except Exception as exc:
                if not _retryable(exc):
                    raise
                last = exc  # a 429/5xx line: asked again in a later wave
        raise ModelCallError(f"model call failed after {backend.max_retries + 1} tries in batches: {last}",
                             retryable=True)

    async def _join(self, api: BatchApi, cid: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        waiting = self._waiting.get(cid)
        if waiting is None:  # the same request asked twice at once: one line in the batch
            waiting = _Waiting(cid, api, path, body, asyncio.get_running_loop().create_future())
            self._waiting[cid] = waiting
            self._pending.append(waiting)
        decision = _DECISION.get()
        self._waits[decision] += 1
        self._changed()
        try:
            return await asyncio.shield(waiting.future)
        finally:
            self._waits[decision] -= 1

    # -- waves ------------------------------------------------------------------------------
    def enter(self, decision: str) -> None:
        self._running[decision] += 1
        self._changed()

    def leave(self, decision: str) -> None:
        self._running[decision] -= 1
        if self._running[decision] <= 0:
            del self._running[decision]
        self._changed()

    def _changed(self) -> None:
        self._version += 1
        if self._pending and (self._watcher is None or self._watcher.done()):
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    def _all_waiting(self) -> bool:
        return all(self._waits[d] > 0 for d in self._running)

    async def _settle(self) -> None:
        if self._store is not None:
            await asyncio.wrap_future(self._store.submit(_nothing))
        await asyncio.sleep(0)

    async def _watch(self) -> None:
        idle = 0
        while self._pending:
            seen = self._version
            await self._settle()
            if self._version != seen:
                idle = 0
                continue
            if self._all_waiting() or idle >= IDLE_ROUNDS:
                self._send_wave()
                idle = 0
            else:
                idle += 1

    def _send_wave(self) -> None:
        wave, self._pending = self._pending, []
        self.waves += 1
        groups: dict[tuple[str, str], list[_Waiting]] = {}
        for waiting in wave:
            groups.setdefault((waiting.api.base_url, waiting.path), []).append(waiting)
        for chunk in (group[i:i + MAX_LINES] for group in groups.values() for i in range(0, len(group), MAX_LINES)):
            flight = asyncio.get_running_loop().create_task(self._fly(chunk))
            self._flights.add(flight)
            flight.add_done_callback(self._flights.discard)

    async def _fly(self, chunk: list[_Waiting]) -> None:
        api, endpoint = chunk[0].api, "/v1" + chunk[0].path
        lines = [{"custom_id": w.cid, "method": "POST", "url": endpoint, "body": w.body} for w in chunk]
        batch_id, state, got = "", BatchState("", "unsent"), {}
        try:
            batch_id = await api.submit(lines, endpoint)
            self.ledger.record(batch_id, api.base_url, endpoint, [w.cid for w in chunk])  # before any poll
            self.submitted.append(batch_id)
            state = await api.wait(batch_id)
            got = await api.replies(state)
        except ModelCallError as exc:
            self._settle_all(chunk, {}, exc)
            return
        except Exception as exc:  # noqa: BLE001 - the SDK's errors, as the calls' failure
            self._settle_all(chunk, {}, ModelCallError(f"the batch {batch_id or '(unsent)'} at {api.base_url} "
                                                       f"could not be read ({one_line(str(exc))[:200]})"))
            return
        missing = ModelCallError(f"batch {batch_id} at {api.base_url} ended {state.status}{state.why} without "
                                 "this call's reply")
        self._settle_all(chunk, got, missing)

    def _settle_all(self, chunk: list[_Waiting], got: dict[str, dict[str, Any]], error: Exception) -> None:
        for waiting in chunk:
            self._waiting.pop(waiting.cid, None)
            if waiting.future.done():
                continue
            line = got.get(waiting.cid)
            if line is not None:
                waiting.future.set_result(line)
            else:
                waiting.future.set_exception(error)

    # -- ending ------------------------------------------------------------------------------
    async def aclose(self, *, finished: bool) -> None:
        """Unhook the backends and close the clients; ``finished`` (every task has its line): the
        batches this run read back or sent leave the ledger, since every reply they hold that a
        decision asked for is in the store (or failed its call)."""
        for flight in list(self._flights):
            flight.cancel()
        if self._watcher is not None:
            self._watcher.cancel()
        for backend in self._hooked:
            backend.__dict__.pop("_apost", None)
        for api in self.apis.values():
            await api.close()
        if finished:
            self.ledger.drop((self._handled | set(self.submitted)) - self.unserved_batches())

    def unserved_batches(self) -> set[str]:
        """Recorded batches holding a reply no decision of this run asked for (tasks a ``--tasks`` run
        left out): they stay in the ledger, so the run that decides those tasks takes the replies. A run
        over the whole pool asked for everything it will ever ask: nothing stays for it."""
        if self.whole_pool:
            return set()
        return {batch for batch, cids in self._replies_of.items() if not cids.isdisjoint(self.recovered)}


def _nothing() -> None:
    return None


class BatchExecutor:
    """The decisions on this loop (:class:`LocalExecutor`), each known to the session's wave rule."""

    def __init__(self, session: BatchSession) -> None:
        self.session = session
        self.inner = LocalExecutor()

    async def decide(self, job: DecisionJob, *, verifier: Any, settings: SelectionSettings, parent: int | None,
                     on_call: Callable[[Any], None] | None) -> PickRecord:
        await self.session.ready(verifier)
        token = _DECISION.set(job.key)
        self.session.enter(job.key)
        try:
            return await self.inner.decide(job, verifier=verifier, settings=settings, parent=parent, on_call=on_call)
        finally:
            self.session.leave(job.key)
            _DECISION.reset(token)


async def aselect_many_batched(jobs: Sequence[DecisionJob], *, ledger: Path, poll_s: tuple[float, float] | None = None,
                               whole_pool: bool = True, **kwargs: Any) -> ManyReport:
    """:func:`~veriscale.many.select_many.aselect_many` with every model call sent in batches.
    ``whole_pool``: ``jobs`` are every task of the pool (no ``--tasks`` or ``--limit``); otherwise a
    recorded batch that answered a call no decision asked for stays in the ledger."""
    session = BatchSession(ledger, poll_s=poll_s, whole_pool=whole_pool)
    finished = False
    try:
        report = await aselect_many(jobs, executor=BatchExecutor(session), **kwargs)
        finished = True
    finally:
        await session.aclose(finished=finished)
    report.notes += session.notes
    said = f"{len(session.submitted)} batch(es) in {session.waves} wave(s)"
    if session.recovered_batches:
        said += f"; {len(session.recovered_batches)} batch(es) of an earlier run read back"
    if finished and (kept := session.unserved_batches()):
        said += f"; {len(kept)} kept in the ledger for the tasks this run did not decide"
    report.notes.append(said)
    return report


def select_many_batched(jobs: Sequence[DecisionJob], **kwargs: Any) -> ManyReport:
    """:func:`aselect_many_batched` from synchronous code (its own event loop)."""
    return sync_edge.run(aselect_many_batched(jobs, **kwargs))
