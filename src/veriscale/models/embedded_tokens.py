"""The embedded model's token-level work on its loaded llama: the KV cache, the next-token
distribution, the labels' tokens and sampling.

:class:`veriscale.models.embedded.EmbeddedModel` is a :class:`LlamaTokens` (its ``__init__`` loads
the llama and sets the attributes below); this is what its ``score`` and ``chat`` are built from::

    tokens = model._tokenize_prompt(render_chat(model.template, messages, prefill))  # ContextOverflow past it
    model._eval_prompt(tokens, stop)          # the KV cache brought to ``tokens``: only the new suffix evaluated
    probs = model._softmax(model._last_logits())          # the full next-token distribution (no top-k cut)
    raw = model._label_probs(probs, ("A", "B"))           # each label's mass, every token spelling it
    model._add_after_whitespace(tokens, probs, raw, ("A", "B"))   # plus the paths through a bare space
    text, out, n, why = model._generate(tokens, 64, 0.0, 0, stop=("Grade",))   # why: "stop" or "length"

Prompts are evaluated in batches of ``N_BATCH`` tokens, the last at least ``MIN_LAST_BATCH`` long (so a
slot's distribution does not depend on what the cache held before); a cancelled call stops between
batches and between generated tokens (``veriscale.models.cancel.stopped``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from veriscale.errors import setting
from veriscale.models.cancel import stopped
from veriscale.models.logprobs import WHITESPACE_MIN_PROB, WHITESPACE_TOKENS

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = ["MIN_LAST_BATCH", "N_BATCH", "LlamaTokens"]

N_BATCH = 512  # prompt tokens evaluated per step (a cancelled call stops between steps)
#: Tokens in the batch whose last logits are read. llama.cpp evaluates a one-token batch by
#: another kernel than a longer one, and their logits differ in the last digits (a label's
#: probability moved by up to 0.03 on SmolLM2): a slot read after a KV-prefix hit that left one
#: token to evaluate then differed from the same prompt read cold. Every read's last batch holds
#: at least two tokens, so a prompt's distribution does not depend on what the cache held before.
MIN_LAST_BATCH = 2


def _batches(start: int, end: int) -> list[slice]:
    """``[start, end)`` in steps of at most N_BATCH, the last one at least MIN_LAST_BATCH long
    (where the span allows)."""
    cuts = list(range(start, end, N_BATCH)) + [end]
    if len(cuts) > 2 and cuts[-1] - cuts[-2] < MIN_LAST_BATCH:
        cuts[-2] = cuts[-1] - MIN_LAST_BATCH
    return [slice(a, b) for a, b in zip(cuts, cuts[1:])]


class LlamaTokens:
    """Token-level machinery over one loaded llama (the subclass sets the attributes below in its ``__init__``)."""

    _llm: Llama
    _n_vocab: int
    _label_ids: dict[str, list[int]]
    _vocab_text: list[str] | None
    tokens_processed: int  # prompt tokens actually evaluated (for benchmarks)
    reuse_prefix: bool

    def context_size(self) -> int:
        return self._llm.n_ctx()

    def _vocab(self) -> list[str]:
        if self._vocab_text is None:
            pieces = []
            for tid in range(self._n_vocab):
                pieces.append(self._llm.detokenize([tid], special=False).decode("utf-8", "replace"))
            self._vocab_text = pieces
        return self._vocab_text

    def _ids_for(self, label: str) -> list[int]:
        """Every token whose text is the label, with or without leading whitespace."""
        if label not in self._label_ids:
            self._label_ids[label] = [i for i, t in enumerate(self._vocab()) if t.strip() == label and t]
        return self._label_ids[label]

    def _eval_prompt(self, tokens: list[int], stop: Any = None) -> int:
        """Bring the KV cache to ``tokens``; returns how many tokens were actually evaluated."""
        llm = self._llm
        common = 0
        if self.reuse_prefix:
            cached = llm.input_ids[: llm.n_tokens]
            limit = min(len(cached), len(tokens) - MIN_LAST_BATCH)  # the slot's logits come from a batch
            if limit > 0:
                neq = np.nonzero(np.asarray(cached[:limit]) != np.asarray(tokens[:limit]))[0]
                common = int(neq[0]) if len(neq) else limit
        llm.n_tokens = common
        for batch in _batches(common, len(tokens)):
            stopped(stop)
            llm.eval(tokens[batch])
        evaluated = len(tokens) - common
        self.tokens_processed += evaluated
        return evaluated

    def _last_logits(self) -> np.ndarray:
        ptr = self._llm._ctx.get_logits_ith(-1)
        return np.ctypeslib.as_array(ptr, shape=(self._n_vocab,)).astype(np.float64)

    @staticmethod
    def _softmax(logits: np.ndarray) -> np.ndarray:
        z = logits - logits.max()
        p = np.exp(z)
        probs: np.ndarray = p / p.sum()
        return probs

    def _tokenize_prompt(self, text: str) -> list[int]:
        tokens = self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        limit = self.context_size()
        if len(tokens) >= limit:
            from veriscale.models.context import ContextOverflow  # a UserError callers can tell apart

            raise ContextOverflow(
                f"the prompt is {len(tokens)} tokens, more than the embedded model's context of {limit}: "
                f"shorten the task or candidates, or set {setting('model')} to a longer-context server",
                context=limit, requested=len(tokens))
        return tokens

    def _generate(self, tokens: list[int], max_tokens: int, temperature: float, seed: int | None,
                  stop: tuple[str, ...], cancel: Any = None, top_p: float | None = None,
                  top_k: int | None = None) -> tuple[str, list[int], int, str]:
        """Sample a continuation of ``tokens`` (already evaluated); returns text, tokens, count and why it
        ended: "stop" (the end of the turn or a stop sequence) or "length" (``max_tokens`` or the context
        ran out). ``top_k`` / ``top_p`` keep the k most likely tokens / the smallest set with that much mass."""
        rng = np.random.default_rng(seed)
        out: list[int] = []
        eos = self._llm.token_eos()
        text = ""
        for _ in range(max_tokens):
            stopped(cancel)
            logits = self._last_logits()
            if temperature <= 0:
                tok = int(np.argmax(logits))
            else:
                tok = int(rng.choice(self._n_vocab, p=_kept(self._softmax(logits / temperature), top_p, top_k)))
            if tok == eos or self._llm.detokenize([tok], special=True).decode("utf-8", "replace") in ("<|im_end|>", "<|endoftext|>"):
                return text, out, len(out), "stop"
            out.append(tok)
            text = self._llm.detokenize(out, special=False).decode("utf-8", "replace")
            if any(s in text for s in stop):
                for s in stop:
                    text = text.split(s)[0]
                return text, out, len(out), "stop"
            if len(tokens) + len(out) >= self.context_size() - 8:
                break
            self._llm.eval([tok])
        return text, out, len(out), "length"

    def _label_probs(self, probs: np.ndarray, labels: tuple[str, ...]) -> dict[str, float]:
        return {lab: float(probs[self._ids_for(lab)].sum()) for lab in labels}

    def _whitespace_ids(self) -> list[int]:
        if not hasattr(self, "_ws_ids"):
            self._ws_ids = [i for i, t in enumerate(self._vocab()) if t in WHITESPACE_TOKENS]
        return self._ws_ids

    def _add_after_whitespace(self, tokens: list[int], probs: np.ndarray, raw: dict[str, float],
                              labels: tuple[str, ...], stop: Any = None) -> int:
        """Add P(whitespace token) * P(label | whitespace) for the likely whitespace tokens.

        Small models often write a bare space or newline before the label; the label's
        probability at the slot is then the sum over both paths. Exact, at one token each.
        """
        evaluated = 0
        for ws in self._whitespace_ids():
            p_ws = float(probs[ws])
            if p_ws < WHITESPACE_MIN_PROB:
                continue
            stopped(stop)
            self._llm.n_tokens = len(tokens) - 1  # the last prompt token again: a batch, as every read
            self._llm.eval([tokens[-1], ws])
            evaluated += 2
            after = self._label_probs(self._softmax(self._last_logits()), labels)
            for lab in labels:
                raw[lab] += p_ws * after[lab]
        return evaluated


def _kept(probs: np.ndarray, top_p: float | None, top_k: int | None) -> np.ndarray:
    """``probs`` cut to the ``top_k`` most likely tokens, then to the smallest set holding ``top_p``
    of the mass, renormalised (unchanged when neither is set)."""
    if not top_k and (top_p is None or top_p >= 1):
        return probs
    order = np.argsort(probs)[::-1]
    if top_k:
        order = order[:top_k]
    if top_p is not None and top_p < 1:
        order = order[:int(np.searchsorted(np.cumsum(probs[order]), top_p)) + 1]
    kept = np.zeros_like(probs)
    kept[order] = probs[order]
    renormalised: np.ndarray = kept / kept.sum()
    return renormalised
