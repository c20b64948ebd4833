"""What an OpenAI-compatible server says about itself, asked once: the model ids it serves, its
context window, what identifies the weights behind a model, and its own token counts.

    probe = ServerProbe("http://127.0.0.1:8080/v1", requested="smollm2")
    info = probe.info(httpx.Client())          # or: info = await probe.ainfo(httpx.AsyncClient())
    info.model_id, info.context, info.weights  # 'smollm2', 8192, 'model=/m/smollm2.gguf size=...'
    probe.count(httpx.Client(), "some text")   # the server's token count, or None without a tokenizer
    probe.token_ids(httpx.Client(), "text")    # its token ids, or None; probe.token_pieces(client, [[ids]])
    probe.requests                             # tokenizer requests sent (count, tokenize, detokenize)

Sources: ``GET /v1/models`` (ids; vLLM's ``max_model_len`` and ``root``; llama-server's ``meta``),
``GET /props`` of the C++ llama-server (``default_generation_settings.n_ctx``, ``model_path``,
``chat_template``),
and for token counts ``POST /extras/tokenize/count`` (llama_cpp.server) or ``POST /tokenize``
(llama-server reads ``content``, vLLM ``prompt``); for token ids ``POST /extras/tokenize`` or
``POST /tokenize``, and for the text of ids the matching detokenizer (``/extras/detokenize``,
``/detokenize``): groups of ids are decoded in one request, split by a separator token. A model
the URI names that the server does not list is a UserError listing the ids it serves.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import httpx

from veriscale.errors import UserError, setting
from veriscale.models.base import drive_sync

if TYPE_CHECKING:
    from veriscale.data.token_spans import TokenSpans

PROBE_TIMEOUT_S = 10.0
#: Served ids an error message lists before "and N more".
IDS_SHOWN = 12
#: Tokenizer routes, tried in order; the first that answers is kept.
TOKENIZE_ROUTES = ("/extras/tokenize/count", "/tokenize")
#: Routes that give token ids, tried in order, each with the detokenizer that reads them back.
TOKEN_ID_ROUTES = {"/extras/tokenize": "/extras/detokenize", "/tokenize": "/detokenize"}
#: What separates groups of ids decoded in one request (a control character: one token, rare in text).
PIECE_SEPARATOR = "\x1f"


@dataclass(frozen=True)
class ServerInfo:
    """What the server reported: ``ids`` it lists, the ``model_id`` used, ``context`` and ``weights`` if said."""

    model_id: str
    ids: tuple[str, ...] = ()
    context: int | None = None
    weights: str | None = None
    chat_template: str | None = None  # the model's own (Jinja) chat template, where the server reports it


class _SyncHttp:
    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    async def get(self, url: str) -> httpx.Response:
        return self.client.get(url, timeout=PROBE_TIMEOUT_S)

    async def post(self, url: str, body: dict[str, Any]) -> httpx.Response:
        return self.client.post(url, json=body, timeout=PROBE_TIMEOUT_S)


class _AsyncHttp:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def get(self, url: str) -> httpx.Response:
        return await self.client.get(url, timeout=PROBE_TIMEOUT_S)

    async def post(self, url: str, body: dict[str, Any]) -> httpx.Response:
        return await self.client.post(url, json=body, timeout=PROBE_TIMEOUT_S)


def _json(resp: httpx.Response) -> Any:
    if resp.status_code != 200:
        return None
    try:
        return resp.json()
    except ValueError:
        return None


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def server_root(base_url: str) -> str:
    """``http://h:8000`` for ``http://h:8000/v1``: where the non-OpenAI routes live."""
    base = base_url.rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


class ServerProbe:
    """Asks one server about one model, once (sync or async); learns a context an overflow names."""

    def __init__(self, base_url: str, requested: str | None, *, context: int | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.root = server_root(self.base_url)
        self.requested = requested
        self.configured_context = context  # the URI's context=N: used when the server says nothing
        self.learned_context: int | None = None
        self._info: ServerInfo | None = None
        self._lock = threading.Lock()
        self._alocks: dict[int, tuple[Any, asyncio.Lock]] = {}
        self._route: str | None = None  # the tokenizer route that answers; "" when none does
        self._baseline = 0  # tokens the route adds to any text (a BOS)
        self._id_route: str | None = None  # the route that gives token ids; "" when none does
        self._id_baseline: list[int] = []  # ids the route adds to any text (a BOS)
        self._separator: int | None = None  # the id of PIECE_SEPARATOR; -1 when it is not one token
        self.requests = 0  # tokenizer requests sent (count, ids, pieces), for the run's cost
        self._requests_lock = threading.Lock()
        self._spans: TokenSpans | None = None  # the TokenSpans over this server's tokenizer (:meth:`spans`)

    _LEARNED = ("learned_context", "_info", "_route", "_baseline", "_id_route", "_id_baseline", "_separator")

    def learned(self) -> dict[str, Any]:
        """What this probe found out (the server's info, its tokenizer routes), for :meth:`adopt`."""
        return {name: getattr(self, name) for name in self._LEARNED}

    def adopt(self, learned: dict[str, Any]) -> None:
        """Take what another probe of the same server found out, so this one asks nothing again."""
        for name in self._LEARNED:
            if name in learned:
                setattr(self, name, learned[name])

    # -- the model list and the server's own settings -----------------------------------------
    def info(self, client: httpx.Client) -> ServerInfo:
        """What the server says (asked on the first call only)."""
        with self._lock:
            if self._info is None:
                self._info = drive_sync(self._read(_SyncHttp(client)))
            return self._info

    async def ainfo(self, client: httpx.AsyncClient) -> ServerInfo:
        """:meth:`info` on the running event loop, through the async client."""
        if self._info is not None:
            return self._info
        async with self._alock():
            if self._info is None:
                self._info = await self._read(_AsyncHttp(client))
            return self._info

    def _alock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._lock:
            found = self._alocks.get(id(loop))
            if found is None or found[0] is not loop:
                found = (loop, asyncio.Lock())
                self._alocks[id(loop)] = found
            return found[1]

    def context(self) -> int | None:
        """The context window: reported by the server, else learned from an overflow, else configured."""
        reported = self._info.context if self._info is not None else None
        return reported or self.learned_context or self.configured_context

    async def _read(self, http: _SyncHttp | _AsyncHttp) -> ServerInfo:
        try:
            models = _json(await http.get(f"{self.base_url}/models"))
        except httpx.ConnectError:
            raise UserError(f"cannot reach the model server at {self.base_url}: start it, or fix the URL in "
                            f"{setting('model')}") from None
        except httpx.HTTPError:
            models = None
        entries = [m for m in (models or {}).get("data", []) if isinstance(m, dict) and m.get("id")] \
            if isinstance(models, dict) else []
        ids = tuple(str(m["id"]) for m in entries)
        model_id = self._choose(ids)
        entry = next((m for m in entries if str(m["id"]) == model_id), {})
        context = _positive_int(entry.get("max_model_len"))  # vLLM
        weights = [f"root={entry['root']}"] if entry.get("root") else []  # vLLM: the weights it loaded
        raw_meta = entry.get("meta")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        weights += [f"{k}={meta[k]}" for k in ("size", "n_params") if meta.get(k)]  # llama-server
        try:
            props = _json(await http.get(f"{self.root}/props"))
        except httpx.HTTPError:
            props = None
        template = None
        if isinstance(props, dict):  # the C++ llama-server
            template = props.get("chat_template") if isinstance(props.get("chat_template"), str) else None
            settings = props.get("default_generation_settings")
            settings = settings if isinstance(settings, dict) else {}
            context = context or _positive_int(settings.get("n_ctx")) or _positive_int(props.get("n_ctx"))
            if props.get("model_path"):
                weights.insert(0, f"model={props['model_path']}")
        return ServerInfo(model_id, ids, context, " ".join(weights) or None, template)

    def _choose(self, ids: tuple[str, ...]) -> str:
        if self.requested and (not ids or self.requested in ids):
            return self.requested
        if self.requested:
            shown = ", ".join(ids[:IDS_SHOWN]) + (f" and {len(ids) - IDS_SHOWN} more" if len(ids) > IDS_SHOWN else "")
            raise UserError(f"the server at {self.base_url} does not serve model '{self.requested}' (it serves "
                            f"{shown}): name one of them in {setting('model')}, e.g. {self.base_url}#{ids[0]}")
        if ids:
            return ids[0]
        raise UserError(f"the server at {self.base_url} lists no models: name one in the URI, e.g. "
                        f"{self.base_url}#my-model")

    # -- the server's tokenizer ---------------------------------------------------------------
    def count(self, client: httpx.Client, text: str) -> int | None:
        """Tokens of ``text`` by the server's tokenizer; None when the server has none."""
        return drive_sync(self._count(_SyncHttp(client), text))

    async def acount(self, client: httpx.AsyncClient, text: str) -> int | None:
        """:meth:`count` through the async client."""
        return await self._count(_AsyncHttp(client), text)

    async def _count(self, http: _SyncHttp | _AsyncHttp, text: str) -> int | None:
        if self._route == "":
            return None
        routes = (self._route,) if self._route else TOKENIZE_ROUTES
        for route in routes:
            n = await self._ask(http, route, text)
            if n is not None:
                if self._route is None:
                    self._route = route
                    self._baseline = (await self._ask(http, route, "")) or 0
                return max(0, n - self._baseline)
        if self._route is None:
            self._route = ""
        return None

    async def _ask(self, http: _SyncHttp | _AsyncHttp, route: str, text: str) -> int | None:
        data = await self._post(http, route, self._text_body(route, text))
        if not isinstance(data, dict):
            return None
        if isinstance(data.get("tokens"), list):
            return len(data["tokens"])
        count = data.get("count")
        return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None

    def _text_body(self, route: str, text: str) -> dict[str, Any]:
        body: dict[str, Any] = {"input": text} if route.startswith("/extras/") else \
            {"content": text, "prompt": text, "add_special": False, "add_special_tokens": False}
        return self._with_model(body)

    def _with_model(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.requested or self._info is not None:
            body["model"] = self._info.model_id if self._info is not None else self.requested
        return body

    async def _post(self, http: _SyncHttp | _AsyncHttp, route: str, body: dict[str, Any]) -> Any:
        """One tokenizer request, counted; its JSON, or None."""
        with self._requests_lock:
            self.requests += 1
        try:
            return _json(await http.post(self.root + route, body))
        except httpx.HTTPError:
            return None

    # -- token ids and their text -------------------------------------------------------------
    def spans(self, client: httpx.Client, count: Callable[[str], int]) -> TokenSpans:
        """This server's tokenizer as one ``veriscale.data.token_spans.TokenSpans`` (made on first use):
        each distinct text tokenised once, cut at token offsets; ``count`` counts where it gives no ids."""
        with self._lock:
            if self._spans is None:
                from veriscale.data.token_spans import TokenSpans

                self._spans = TokenSpans(ServerTokens(self, client, count))
            return self._spans

    def token_ids(self, client: httpx.Client, text: str) -> list[int] | None:
        """The server's token ids of ``text`` (none added for it); None when the server gives no ids."""
        return drive_sync(self._token_ids(_SyncHttp(client), text))

    async def _token_ids(self, http: _SyncHttp | _AsyncHttp, text: str) -> list[int] | None:
        if self._id_route == "":
            return None
        for route in (self._id_route,) if self._id_route else tuple(TOKEN_ID_ROUTES):
            ids = await self._ask_ids(http, route, text)
            if ids is not None:
                if self._id_route is None:
                    self._id_route = route
                    self._id_baseline = (await self._ask_ids(http, route, "")) or []
                base = self._id_baseline
                return ids[len(base):] if base and ids[:len(base)] == base else ids
        if self._id_route is None:
            self._id_route = ""
        return None

    async def _ask_ids(self, http: _SyncHttp | _AsyncHttp, route: str, text: str) -> list[int] | None:
        data = await self._post(http, route, self._text_body(route, text))
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            return None
        return tokens

    def token_pieces(self, client: httpx.Client, groups: Sequence[Sequence[int]]) -> list[str] | None:
        """The text of each group of ids, decoded in one request; None when the server cannot (no
        detokenizer, or a group that is no whole characters)."""
        return drive_sync(self._token_pieces(_SyncHttp(client), groups))

    async def _token_pieces(self, http: _SyncHttp | _AsyncHttp, groups: Sequence[Sequence[int]]) -> list[str] | None:
        if not self._id_route:
            return None
        if not groups:
            return []
        if self._separator is None:
            ids = await self._token_ids(http, PIECE_SEPARATOR)
            self._separator = ids[0] if ids is not None and len(ids) == 1 else -1
        if self._separator < 0:
            return None
        tokens = [self._separator]
        for group in groups:
            tokens += [*group, self._separator]
        data = await self._post(http, TOKEN_ID_ROUTES[self._id_route], self._with_model({"tokens": tokens}))
        text = next((data[k] for k in ("text", "content", "prompt") if isinstance(data.get(k), str)), None) \
            if isinstance(data, dict) else None
        parts = text.split(PIECE_SEPARATOR) if text is not None else []
        if len(parts) != len(groups) + 2 or parts[0] or parts[-1]:
            return None
        return parts[1:-1]


class ServerTokens:
    """A server's tokenizer as ``veriscale.data.token_spans.TokenSource``: ids and pieces through the
    probe, the exact count through ``count`` (the backend's: the server's, else its estimate)."""

    def __init__(self, probe: ServerProbe, client: httpx.Client, count: Callable[[str], int]) -> None:
        self.probe, self.client, self.count = probe, client, count

    @property
    def requests(self) -> int:
        return self.probe.requests

    def token_ids(self, text: str) -> list[int] | None:
        return self.probe.token_ids(self.client, text)

    def token_pieces(self, groups: Sequence[Sequence[int]]) -> list[str] | None:
        return self.probe.token_pieces(self.client, groups)
