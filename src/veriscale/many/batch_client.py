"""The wire side of ``select-many --batch``: one OpenAI-compatible server's Batch API through the
official ``openai`` SDK (``pip install 'veriscale[batch]'``).

    api = BatchApi("http://10.0.0.7:8000/v1", api_key=None)
    await api.check()                                   # no /v1/batches or /v1/files: one sentence
    check_batch_api(model)                              # the same for each endpoint of a model, before any work
    batch_id = await api.submit(lines, "/v1/chat/completions")   # uploads the JSONL, creates the batch
    done = await api.wait(batch_id)                     # polls until completed, failed, expired or cancelled
    replies = await api.replies(done)                   # custom_id -> output line (response or error)

An input line is ``{"custom_id", "method": "POST", "url", "body"}``; an output line holds the same
``custom_id`` and either ``response`` (``status_code``, ``body``) or ``error`` (``code``, ``message``).
The fields are the SDK's (``openai.types.Batch``, ``FileObject``; ``batches.create`` takes
``input_file_id``, ``endpoint`` and ``completion_window="24h"``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from veriscale.engine import sync_edge
from veriscale.errors import ModelCallError, UserError, one_line, setting
from veriscale.many.executors import model_backends

#: a batch's end states (the SDK's ``Batch.status``); the others are still running
TERMINAL = ("completed", "failed", "expired", "cancelled")
#: seconds between polls of a running batch: the first, growing by half each time to the last
POLL_S = (0.2, 30.0)


@dataclass
class BatchState:
    """What a poll said about one batch."""

    id: str
    status: str
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def why(self) -> str:
        """The batch's own reasons, for the sentence of a batch that did not complete."""
        return f" ({'; '.join(self.errors)[:300]})" if self.errors else ""


def _client(base_url: str, api_key: str | None) -> Any:
    try:
        from openai import AsyncOpenAI
    except ImportError:
        raise UserError(f"{setting('batch')} sends the calls through the openai SDK, which is not installed: "
                        "pip install 'veriscale[batch]'") from None
    return AsyncOpenAI(base_url=base_url, api_key=api_key or "none", max_retries=4)


class BatchApi:
    """The Batch API of the server at ``base_url`` (``.../v1``)."""

    def __init__(self, base_url: str, *, api_key: str | None = None, poll_s: tuple[float, float] = POLL_S) -> None:
        self.base_url = base_url.rstrip("/")
        self.poll_s = poll_s
        self._sdk = _client(self.base_url, api_key)

    async def check(self) -> None:
        """Refuse, in one sentence, a server without ``/v1/batches`` or ``/v1/files``."""
        import openai

        asks: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("/batches", lambda: self._sdk.batches.list(limit=1)), ("/files", lambda: self._sdk.files.list(purpose="batch"))]
        for what, ask in asks:
            try:
                await ask()
            except openai.NotFoundError:
                raise UserError(f"{self.base_url} offers no Batch API ({self.base_url}{what} answered 404): drop "
                                f"{setting('batch')} to send each call on its own") from None
            except openai.APIConnectionError as exc:
                raise UserError(f"cannot reach {self.base_url} to check its Batch API ({one_line(str(exc))}): is the "
                                "server running?") from None
            except openai.APIStatusError as exc:
                raise UserError(f"{self.base_url}{what} answered HTTP {exc.status_code} "
                                f"({one_line(str(exc.message))[:200]}): {setting('batch')} needs its Batch API, "
                                f"or drop {setting('batch')}") from None

    async def submit(self, lines: list[dict[str, Any]], endpoint: str) -> str:
        """Upload ``lines`` as a JSONL file with purpose "batch" and create the batch: its id."""
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
        try:
            uploaded = await self._sdk.files.create(file=("veriscale-batch.jsonl", data), purpose="batch")
            batch = await self._sdk.batches.create(input_file_id=uploaded.id, endpoint=endpoint,
                                                   completion_window="24h")
        except Exception as exc:  # noqa: BLE001 - the SDK's errors, as the calls' failure
            raise ModelCallError(f"{self.base_url} refused the batch of {len(lines)} calls "
                                 f"({one_line(str(exc))[:300]})") from None
        return str(batch.id)

    async def poll(self, batch_id: str) -> BatchState:
        """One look at the batch."""
        batch = await self._sdk.batches.retrieve(batch_id)
        errors = [one_line(f"{e.code or 'error'}: {e.message or ''}".strip())
                  for e in ((batch.errors.data or []) if batch.errors is not None else [])]
        return BatchState(batch.id, batch.status, batch.output_file_id, batch.error_file_id, errors)

    async def wait(self, batch_id: str) -> BatchState:
        """Poll until the batch ends (:data:`TERMINAL`); a poll that fails is tried again at the next turn,
        a batch the server no longer knows ends as ``missing``."""
        import openai

        delay, fails = self.poll_s[0], 0
        while True:
            try:
                state = await self.poll(batch_id)
                fails = 0
            except openai.NotFoundError:
                return BatchState(batch_id, "missing", errors=["the server no longer knows this batch"])
            except (openai.APIConnectionError, openai.APIStatusError) as exc:
                fails += 1
                if fails > 10:
                    raise ModelCallError(f"cannot poll batch {batch_id} at {self.base_url} "
                                         f"({one_line(str(exc))[:200]})") from None
                state = BatchState(batch_id, "unknown")
            if state.status in TERMINAL:
                return state
            await asyncio.sleep(delay)
            delay = min(self.poll_s[1], delay * 1.5)

    async def replies(self, state: BatchState) -> dict[str, dict[str, Any]]:
        """Every output (and error file) line of an ended batch, by ``custom_id``; an expired or
        cancelled batch gives the lines it finished."""
        found: dict[str, dict[str, Any]] = {}
        for file_id in (state.error_file_id, state.output_file_id):  # an answer supersedes an error line
            if not file_id:
                continue
            content = await self._sdk.files.content(file_id)
            for raw in content.text.splitlines():
                if raw.strip():
                    line = json.loads(raw)
                    if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                        found[line["custom_id"]] = line
        return found

    async def close(self) -> None:
        await self._sdk.close()


def api_key_of(backend: Any, default: str | None = None) -> str | None:
    """The API key ``backend`` sends (its bearer header), else ``default``."""
    auth = str(getattr(backend, "_headers", {}).get("Authorization", ""))
    return auth.removeprefix("Bearer ") or default


def http_backends(model: Any) -> list[Any]:
    """The model's OpenAI-compatible backends; any other (the embedded model, a two-stage or a
    Messages backend) is refused in one sentence."""
    from veriscale.models.openai_compat import OpenAICompatModel

    backends = model_backends(model)
    for backend in backends:
        if not isinstance(backend, OpenAICompatModel):
            raise UserError(f"{setting('batch')} sends calls through an OpenAI-compatible server's Batch API, and "
                            f"{getattr(backend, 'uri', backend)} is not one: give {setting('model')} http://HOST/v1, "
                            f"or drop {setting('batch')}")
    return backends


def check_batch_api(model: Any, api_key: str | None = None) -> None:
    """Refuse, before any work, a model that is not served over HTTP or whose server has no Batch API."""
    async def check() -> None:
        keys = {b.base_url: api_key_of(b, api_key) for b in http_backends(model)}
        for base_url, key in keys.items():
            api = BatchApi(base_url, api_key=key)
            try:
                await api.check()
            finally:
                await api.close()

    http_backends(model)
    sync_edge.run(check())
