"""The server's tokenizer as an OpenAI-compatible backend asks it: token counts, the ids a
``logprob_token_ids`` read asks for, the check that every label is one token, and the one memo of
ids per server shared with rendering (``veriscale.data.token_spans.TokenSpans``)::

    class OpenAICompatModel(ServerTokenizer): ...       # the backend is one
    m.count_tokens(text)                                 # the server's count, else the estimate
    m.single_token_labels(("A", "B"))                    # the labels that are not one token
    await m.slot_token_ids(("A", "B"), m._apost)         # ids for a logprob_token_ids read, or None

The routes tried are llama.cpp's ``/extras/tokenize`` and vLLM's / SGLang's ``/tokenize``; a server
with neither gives None (and the estimate counts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

from veriscale.models.base import drive_sync
from veriscale.models.context import estimate_tokens
from veriscale.models.http_transport import HttpTransport
from veriscale.models.read_probe import SENTINEL_TEXT, Post, Probe
from veriscale.models.server_info import ServerProbe

if TYPE_CHECKING:
    from veriscale.data.token_spans import TokenSpans


class ServerTokenizer(HttpTransport):
    """Tokenizer requests to one server, over the blocking or the async client (the subclass sets
    the attributes below in its ``__init__``)."""

    requested_model: str | None
    _probe: ServerProbe
    _label_checks: dict[tuple[str, ...], list[str]]
    _slot_ids: dict[tuple[str, ...], list[int] | None]

    async def slot_token_ids(self, labels: tuple[str, ...], post: Post) -> list[int] | None:
        """The token ids a ``logprob_token_ids`` read asks for: each label alone and after a space, the
        bare whitespace tokens, and a sentinel that shows the server honoured the list (None without a
        tokenizer, or when the sentinel is not one token). Asked over ``post``'s transport, once per labels."""
        if labels not in self._slot_ids:
            probe = self._sync_probe if post == self._sync_post else self._aprobe
            self._slot_ids[labels] = await self._token_ids(labels, probe)
        return self._slot_ids[labels]

    async def sentinel_token_id(self, post: Post) -> int | None:
        """The id of the read probe's sentinel token (one tokenizer request), or None without a tokenizer."""
        probe = self._sync_probe if post == self._sync_post else self._aprobe
        root = self.base_url.removesuffix("/v1")
        got = await self._tokenize(root, SENTINEL_TEXT, probe)
        return got[0] if got and len(got) == 1 else None

    async def _token_ids(self, labels: tuple[str, ...], probe: Probe) -> list[int] | None:
        root = self.base_url.removesuffix("/v1")
        ids: list[int] = []
        for text in [*labels, *(" " + lab for lab in labels), " ", "\n", SENTINEL_TEXT]:
            got = await self._tokenize(root, text, probe)
            if got is None:
                return None
            if len(got) == 1 and got[0] not in ids:
                ids.append(got[0])
            elif text == SENTINEL_TEXT:
                return None
        return ids

    def count_tokens(self, text: str) -> int:
        """The server's own count where it has a tokenizer, else ``context.estimate_tokens`` (a margin
        over the truth). The same text counts the same from any caller; on an event loop prefer
        :meth:`acount_tokens`, which does not block it."""
        n = self._probe.count(self._client, text)
        return estimate_tokens(text) if n is None else n

    async def acount_tokens(self, text: str) -> int:
        """:meth:`count_tokens` through the async client (the server's count where it has one)."""
        n = await self._probe.acount(self._async_client(), text)
        return estimate_tokens(text) if n is None else n

    def token_spans(self) -> TokenSpans:
        """The server's tokenizer for rendering (``veriscale.data.token_spans.TokenSpans``, one per
        backend): each distinct text tokenised once, cuts made at token offsets; where the server gives no
        token ids it counts as :meth:`count_tokens` does."""
        return self._probe.spans(self._client, self.count_tokens)

    def tokenizer_requests(self) -> int:
        """Tokenizer requests this backend sent so far (counts, ids, pieces, label checks), for a run's cost."""
        return self._probe.requests + self.tokenize_posts.value

    def single_token_labels(self, labels: tuple[str, ...]) -> list[str]:
        """Labels that tokenize to more than one token, where the server can tokenize."""
        if labels not in self._label_checks:
            self._label_checks[labels] = drive_sync(self._check_labels(labels, self._sync_probe))
        return list(self._label_checks[labels])

    async def asingle_token_labels(self, labels: tuple[str, ...]) -> list[str]:
        """:meth:`single_token_labels` over the async client."""
        if labels not in self._label_checks:
            self._label_checks[labels] = await self._check_labels(labels, self._aprobe)
        return list(self._label_checks[labels])

    async def _check_labels(self, labels: tuple[str, ...], probe: Probe) -> list[str]:
        root = self.base_url.removesuffix("/v1")
        bad = []
        for lab in labels:
            counts = []
            for text in (lab, " " + lab):
                n = await self._tokenize_count(root, text, probe)
                if n is None:
                    return []  # cannot check on this server
                counts.append(n)
            if min(counts) != 1:
                bad.append(lab)
        return bad

    async def _tokenize_count(self, root: str, text: str, probe: Probe) -> int | None:
        ids = await self._tokenize(root, text, probe)
        return None if ids is None else len(ids)

    async def _tokenize(self, root: str, text: str, probe: Probe) -> list[int] | None:
        """The server's token ids of ``text`` (no special tokens), or None when it cannot tokenize; asked
        once per text (the label check and the logprob_token_ids read share the labels' tokens)."""
        spans = self.token_spans()  # one memo of ids per server tokenizer, shared with rendering
        known, ids = spans.known_ids(text)
        if not known:
            ids = await self._tokenize_once(root, text, probe)
            spans.remember_ids(text, ids)
        return ids

    async def _tokenize_once(self, root: str, text: str, probe: Probe) -> list[int] | None:
        for path, body, field in (("/extras/tokenize", {"input": text}, "tokens"),
                                  ("/tokenize", {"prompt": text, "add_special_tokens": False}, "tokens")):
            try:
                resp = await probe(root + path, {**body, "model": self.requested_model or ""})
                if resp.status_code == 200 and isinstance(resp.json().get(field), list):
                    ids: list[int] = [t for t in resp.json()[field] if isinstance(t, int)]
                    return ids
            except (httpx.HTTPError, ValueError):
                continue
        return None


__all__ = ["ServerTokenizer"]
