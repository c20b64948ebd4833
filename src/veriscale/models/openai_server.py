"""What an OpenAI-compatible backend knows of its server: who it is, how it reads a slot, its context.

:class:`veriscale.models.openai_compat.OpenAICompatModel` is a :class:`ServerView` (its ``__init__``
sets the attributes below). The server is asked once (``veriscale.models.server_info``: ids, context,
weights) and probed once for its read (``veriscale.models.read_probe``); the fingerprint, the
calibration key and the state a copy elsewhere adopts are built on what came back. Every reply is
checked against the model asked for (``check_reply_model``)::

    m.model_id(), await m.amodel_id()     # the URI's id, checked against the server's list
    m.fingerprint()                       # 'http:<url>#<id> [weights] read=<plan key> ...'
    m.read_plan()                         # ReadPlan, probed on first use; m.aread_plan() on the loop
    m.calibration_key(), m.context_size()
    m.adopt_probed_state(other.probed_state())   # a Ray worker's copy sends no probe of its own
    data = m.check_reply_model(reply, body)      # ModelCallError on another model (or a note)
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from veriscale.errors import ModelCallError, worded
from veriscale.models.base import drive_sync
from veriscale.models.openai_tokenizer import ServerTokenizer
from veriscale.models.read_probe import Post, probe_read_plan
from veriscale.models.read_strategy import READ_MARK, ReadKind, ReadPlan
from veriscale.models.reply_model import LOG, mismatch_sentence, model_mismatch_mode, same_model
from veriscale.models.server_info import ServerInfo

__all__ = ["ServerView"]


class ServerView(ServerTokenizer):
    """One OpenAI-compatible server as a backend knows it (the subclass sets the attributes below
    in its ``__init__``)."""

    base_url: str
    display_name: str
    template: str | None
    endpoint: str
    endpoint_chosen: bool
    top_logprobs: int
    grammar: bool | None
    sample: int | None
    read: str
    weights_file: str | None
    model_mismatch: str | None
    _mismatches_noted: set[tuple[str, str]]
    _plan: ReadPlan | None

    # -- identity --------------------------------------------------------------------------
    def model_id(self) -> str:
        """The model id used in requests: the URI's, checked against the server's list (asked once)."""
        return self._probe.info(self._client).model_id

    async def amodel_id(self) -> str:
        """:meth:`model_id` through the async client (the gateway's loop keeps serving meanwhile)."""
        return (await self._probe.ainfo(self._async_client())).model_id

    @property
    def limit_key(self) -> str:
        """What the gateway's per-endpoint limits are keyed by: the server and the model asked for."""
        return f"{self.base_url}#{self.requested_model or ''}"

    def fingerprint(self) -> str:
        """``http:<url>#<model id>``, with what the server says about the weights where it says it, and
        how a slot is read (endpoint, template, read strategy): another path is another cache key."""
        return self._fingerprint_of(self._probe.info(self._client), self.read_plan())

    async def afingerprint(self) -> str:
        """:meth:`fingerprint` through the async client (for the gateway's event loop)."""
        return self._fingerprint_of(await self._probe.ainfo(self._async_client()), await self.aread_plan())

    async def aweights_fingerprint(self) -> str:
        """The fingerprint without its read part, asked with no read probe (what a chat call is keyed by)."""
        info = await self._probe.ainfo(self._async_client())
        return f"http:{self.base_url}#{info.model_id}" + (f" [{info.weights}]" if info.weights else "")

    def _fingerprint_of(self, info: ServerInfo, plan: ReadPlan) -> str:
        # the read plan names the joint constraint: it changes what a joint reply writes before its later slots
        return (f"http:{self.base_url}#{info.model_id}" + (f" [{info.weights}]" if info.weights else "")
                + f"{READ_MARK}{plan.key()}" + (f" template={self.template}" if self.endpoint == "completions" else ""))

    def calibration_key(self) -> str:
        """What τ is stored under: the weights (the declared GGUF file's hash, as the embedded model of
        that file has, else the server and model id), plus the read where it is not exact and prefilled
        (every exact prefilled path gives the same rewards, so they share one τ)."""
        plan = self.read_plan()
        if self.weights_file:
            from veriscale.models.embedded_files import file_sha256

            st = os.stat(self.weights_file)
            weights = "gguf:" + file_sha256(os.path.realpath(self.weights_file), st.st_size, st.st_mtime_ns)
        else:
            info = self._probe.info(self._client)
            weights = f"http:{self.base_url}#{info.model_id}" + (f" [{info.weights}]" if info.weights else "")
        return weights if plan.strategy == "exact" else f"{weights} read={plan.strategy}"

    # -- what was probed, handed to a copy elsewhere (a Ray worker) -----------------------------
    def probed_state(self) -> dict[str, Any]:
        """What this backend learned from its server: the read plan and the server's info and
        tokenizer routes (probing first what it had not yet), for :meth:`adopt_probed_state`."""
        self.read_plan()
        self._probe.info(self._client)
        return {"plan": self._plan, "probe": self._probe.learned()}

    def adopt_probed_state(self, state: dict[str, Any]) -> None:
        """Take another copy's :meth:`probed_state`: this backend sends no probe of its own."""
        self._plan = state.get("plan") or self._plan
        self._probe.adopt(state.get("probe") or {})

    # -- how a slot is read ------------------------------------------------------------------
    def supports_joint(self) -> bool:
        """Whether a joint reply can be held to its format here (the probe's ``joint``): without that a
        joint reply costs more than separate scoring, so the Verifier scores separately."""
        return self.read_plan().joint is not None

    def read_plan(self) -> ReadPlan:
        """How this server reads a slot, probed on first use (``veriscale.models.read_probe``)."""
        if self._plan is None:
            self._plan = drive_sync(probe_read_plan(self, self._sync_post))
        return self._plan

    async def aread_plan(self) -> ReadPlan:
        """:meth:`read_plan` through the async client."""
        if self._plan is None:
            self._plan = await probe_read_plan(self, self._apost)
        return self._plan

    def _fall_back(self, why: str) -> ReadPlan:
        """The plan after the server refused the current one mid-run: top-k, with a note (never an error)."""
        self._plan = self._plan or ReadPlan(ReadKind.TOP_K, self.endpoint == "completions", self.endpoint, "top-logprobs")
        self._changed_plan(why, kind=ReadKind.TOP_K, method="top-logprobs", width=self.top_logprobs, joint=None)
        return self._plan

    def _changed_plan(self, why: str, **change: Any) -> None:
        """The read plan with ``change`` made mid-run and ``why`` noted: the verdict says it, and the
        new method is part of the cache key, so readings from before and after never mix."""
        if self._plan is not None:
            self._plan = replace(self._plan, notes=self._plan.notes + (why,), **change)

    def context_size(self) -> int | None:
        """The context the server reports, else the one an overflow reply named, else the URI's ``context``."""
        self._probe.info(self._client)
        return self._probe.context()

    # -- lifecycle ---------------------------------------------------------------------------
    def _learned_context(self, context: int | None) -> None:
        self._probe.learned_context = context or self._probe.learned_context

    # -- what the read probe asks of the backend -----------------------------------------------
    async def _ident(self, post: Post) -> str:
        """The model id, over the transport ``post`` belongs to."""
        return self.model_id() if post == self._sync_post else await self.amodel_id()

    async def _server_info(self, post: Post) -> ServerInfo:
        """What the server says about itself, over the transport ``post`` belongs to."""
        return self._probe.info(self._client) if post == self._sync_post else await self._probe.ainfo(self._async_client())

    def prefer_completions(self, template: str) -> None:
        """Read slots through ``/v1/completions`` with ``template`` (the probe found the chat endpoint
        cannot prefill and the server reports its chat template)."""
        self.template, self.endpoint = template, "completions"

    # -- every reply -----------------------------------------------------------------------
    def check_reply_model(self, data: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """``data`` when it answers the model ``body`` asked for (:func:`same_model`); a reply naming another
        model is a failed call, or under ``model_mismatch="note"`` scored with a note (once per pair)."""
        asked = self.requested_model and body.get("model")  # no model in the URI: the server's default answers
        answered = data.get("model") if isinstance(data, dict) else None
        if same_model(asked, answered):
            return data
        mode = self.model_mismatch or model_mismatch_mode()
        said = mismatch_sentence(self.base_url, str(asked), str(answered).strip(), note=mode == "note")
        if mode != "note":
            raise ModelCallError(said)
        pair = (str(asked), str(answered))
        if pair not in self._mismatches_noted:
            self._mismatches_noted.add(pair)
            LOG.warning(worded(said))
            if self._plan is not None and worded(said) not in self._plan.notes:
                self._plan = replace(self._plan, notes=self._plan.notes + (worded(said),))
        return data
