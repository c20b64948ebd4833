"""Grammar-constrained generation on the embedded model: llama.cpp's own GBNF sampler in process.

The embedded backend's ``chat`` takes ``options={"grammar": GBNF}`` (the same text a llama.cpp
server takes in its ``grammar`` field) and samples only what the grammar allows; greedy at
temperature 0::

    text, n, why = grammar_generate(llm, 'root ::= "yes" | "no"', max_tokens=4, temperature=0.0,
                                    seed=0, room=100, check=lambda: None)   # why: "stop" or "length"

``llm`` is a ``llama_cpp.Llama`` whose KV cache already holds the prompt (its last logits are the
first token's); each sampled token is evaluated in turn. A grammar llama.cpp cannot parse is one
sentence (a :class:`veriscale.errors.UserError`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from veriscale.errors import UserError


def grammar_generate(llm: Any, gbnf: str, *, max_tokens: int, temperature: float, seed: int,
                     room: int, check: Callable[[], None]) -> tuple[str, int, str]:
    """Sample up to ``max_tokens`` (and at most ``room``) tokens that ``gbnf`` allows: the text, the count
    and why it ended ("stop": the grammar's end or the end of the turn; "length": the limit ran out)."""
    import llama_cpp
    from llama_cpp import _internals

    chain: Any = _internals.LlamaSampler  # llama_cpp ships no types
    sampler = chain()
    try:
        constraint = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, gbnf.encode("utf-8"), b"root")
        if not constraint:  # llama.cpp could not parse it (and said why on stderr)
            raise UserError("the embedded model cannot parse the grammar it was given: fix the GBNF text")
        llama_cpp.llama_sampler_chain_add(sampler.sampler, constraint)
        if temperature <= 0:
            sampler.add_greedy()
        else:
            sampler.add_temp(temperature)
            sampler.add_dist(seed)
        vocab = llm._model.vocab
        out: list[int] = []
        why = "length"
        for _ in range(min(max_tokens, room)):
            check()
            tok = int(sampler.sample(llm._ctx, -1))  # applies the grammar, picks, and accepts the token
            if llama_cpp.llama_vocab_is_eog(vocab, tok):
                why = "stop"
                break
            out.append(tok)
            llm.eval([tok])
        return llm.detokenize(out, special=False).decode("utf-8", "replace"), len(out), why
    finally:
        sampler.close()

