"""A backend's context window: where its size comes from, what an overflow reply says, and token
counts where no tokenizer is at hand.

    read_overflow(400, '{"error": {"message": "This model\'s maximum context length is 8192 '
                       'tokens. However, you requested 16442 tokens ..."}}')
    # Overflow(context=8192, requested=16442)
    estimate_tokens("def f(x):\\n    return x")   # at least what the tokenizers measured count

Sources of the size, in order: the model itself (the embedded ``n_ctx``), what the server reports
(``veriscale.models.server_info``), the size an overflow reply names (learned once; the caller
refits, see ``veriscale.selection.select.run_selection``), else a ``context`` option of the model
URI (``http://h/v1?context=8192#m``).

``estimate_tokens`` is the stated margin for servers without a tokenizer endpoint: ASCII letters
and whitespace count a token per ``LETTERS_PER_TOKEN`` characters, every other ASCII character
(digits, punctuation) a token, every other character a token per UTF-8 byte (the most a byte-level
tokenizer spends). Measured against the SmolLM2 tokenizer it is 1.3-1.7x the true count on
English prose, Python, JavaScript, JSON and CJK text and 2-2.3x on Cyrillic and emoji
(``tests/models/test_context_fit.py``); long digit runs and random base64 or hex can exceed it
(0.6-0.9x: SmolLM2 spends a token per digit), which the overflow refit covers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from veriscale.errors import UserError, setting

#: Letters and whitespace per token in the estimate (English prose averages about 4.5).
LETTERS_PER_TOKEN = 3

_CONTEXT_PATTERNS = (
    re.compile(r"maximum context length is (\d+)", re.I),          # OpenAI, vLLM, llama_cpp.server
    re.compile(r"exceed(?:s)? context window of (\d+)", re.I),     # llama_cpp (raw)
    re.compile(r"context length \((\d+) tokens\)", re.I),          # SGLang
    re.compile(r"context (?:size|window|length) (?:is |of )?(\d+)", re.I),
)
_REQUESTED_PATTERNS = (
    re.compile(r"you requested (\d+) tokens", re.I),
    re.compile(r"requested tokens \((\d+)\)", re.I),
    re.compile(r"your (?:messages|request|prompt) (?:resulted in|has) (\d+)", re.I),
    re.compile(r"the input \((\d+) tokens\)", re.I),
)
_OVERFLOW_WORDS = ("context_length_exceeded", "exceed_context_size", "context length", "context window",
                   "context size", "maximum context")


@dataclass(frozen=True)
class Overflow:
    """What a context-overflow reply says: the context size and the tokens asked for, where given."""

    context: int | None
    requested: int | None


class ContextOverflow(UserError):
    """A prompt did not fit the model's context; ``context`` is its size when the reply named it."""

    def __init__(self, message: str, *, context: int | None = None, requested: int | None = None) -> None:
        super().__init__(message)
        self.context = context
        self.requested = requested


def learned_context(overflow: ContextOverflow, model: object) -> int | None:
    """The context size an overflow reply taught ``model`` (its ``context_size()`` now says so), else
    None: a plan made before the reply can then be made again, once, to fit (select, track, bench)."""
    size = getattr(model, "context_size", None)
    known = size() if callable(size) else None
    return overflow.context if overflow.context is not None and known == overflow.context else None


def refit_note(context: int, what: str) -> str:
    """The note a refitted plan carries."""
    return f"the prompts overflowed the model's {context}-token context: {what} was refitted to it"


def _first_int(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        if m := pattern.search(text):
            return int(m[1])
    return None


def read_overflow(status: int, body: str) -> Overflow | None:
    """The overflow a 4xx reply reports (None when it is another error).

    Reads the message texts of OpenAI, vLLM, SGLang and llama_cpp.server, and the C++
    llama-server's ``exceed_context_size_error`` with its ``n_ctx`` and ``n_prompt_tokens``.
    """
    if not 400 <= status < 500:
        return None
    text = body[:4000]
    lowered = text.lower()
    if not any(word in lowered for word in _OVERFLOW_WORDS) and "too long" not in lowered:
        return None
    context, requested = _first_int(_CONTEXT_PATTERNS, text), _first_int(_REQUESTED_PATTERNS, text)
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict):  # llama-server: {"error": {"n_ctx": 8192, "n_prompt_tokens": 9000, ...}}
        context = _positive(error.get("n_ctx")) or context
        requested = _positive(error.get("n_prompt_tokens")) or requested
    return Overflow(context, requested)


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def context_option(raw: str | None, uri: str) -> int | None:
    """The ``context=N`` option of a model URI (None when not given); a bad value is a UserError."""
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise UserError(f"option context={raw} in model URI '{uri}' is not a token count: give the model's context "
                        "window, e.g. context=8192")
    return value


def overflow_error(overflow: Overflow, display_name: str, detail: str) -> ContextOverflow:
    """The one-sentence error for a prompt the server refused as too long."""
    size = f"the {overflow.context}-token context" if overflow.context else "the context"
    asked = f" ({overflow.requested} tokens)" if overflow.requested else ""
    return ContextOverflow(
        f"the prompt{asked} is longer than {size} of {display_name} ({detail}): shorten the inputs, lower "
        f"{setting('budget_tokens')} where the command takes one, or use a model with a longer context",
        context=overflow.context, requested=overflow.requested)


_LETTERS = bytes(b for b in range(128) if chr(b).isalpha() or chr(b).isspace())
_NOT_LETTERS = bytes(b for b in range(256) if b not in _LETTERS)
_NOT_ASCII = bytes(range(128, 256))


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` with the stated margin (module docstring): meant to be at least the truth."""
    raw = text.encode("utf-8", "surrogatepass")
    ascii_chars = len(raw.translate(None, _NOT_ASCII))
    letters = len(raw.translate(None, _NOT_LETTERS))
    return max(1, -(-letters // LETTERS_PER_TOKEN) + (ascii_chars - letters) + (len(raw) - ascii_chars))
