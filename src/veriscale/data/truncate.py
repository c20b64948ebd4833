"""Cut one text to a token budget: its head and tail around an elision marker.

    from veriscale.data.truncate import estimate_tokens, truncate_middle

    estimate_tokens("abcdefgh")                        # 2: four characters a token
    truncate_middle(log, 200)                          # head + "[... 81,234 characters elided ...]" + tail
    truncate_middle(log, 200, count_tokens=spans)      # a TokenSpans: cut at token offsets, tokenised once

Cuts prefer line boundaries near the cut point. With a ``veriscale.data.token_spans.TokenSpans``
that cuts by offsets, the text is tokenised once and cut at its token offsets (the result is a
``Counted`` text carrying its estimated count); :func:`fit_exactly` then holds a budget by the
tokenizer's own count.
"""

from __future__ import annotations

from typing import Callable

from veriscale.data.token_spans import Counted, TokenSpans, spans_of

TokenCounter = Callable[[str], int]

CHARS_PER_TOKEN_ESTIMATE = 4
_MAX_CHARS_PER_TOKEN = 16  # for pre-cutting huge text before a (possibly slow) tokenizer sees it
#: Cutting at token offsets: a text longer than twice this is tokenised as its head and tail this long.
SAMPLE_CHARS = 100_000


def estimate_tokens(text: str) -> int:
    """Token estimate of ``text``: one token per 4 characters, rounded up (no tokenizer needed)."""
    return (len(text) + CHARS_PER_TOKEN_ESTIMATE - 1) // CHARS_PER_TOKEN_ESTIMATE



def _elision_marker(chars: int) -> str:
    return f"\n[... {chars:,} characters elided ...]\n"


def truncate_middle(
    text: str,
    max_tokens: int,
    count_tokens: TokenCounter = estimate_tokens,
    head_share: float = 0.5,
) -> str:
    """``text`` if it fits ``max_tokens``; else its head and tail around an elision marker.

    A text longer than ``max_tokens`` x ``_MAX_CHARS_PER_TOKEN`` characters never fits, whatever the
    counter says (a whitespace-word counter calls a 50 MB line one token), so what comes back is
    bounded by the budget. Cuts prefer line boundaries near the cut point. Returns "" when
    ``max_tokens`` cannot even hold the marker.
    """
    if max_tokens <= 0:
        return ""
    spans = spans_of(count_tokens)
    if spans is not None:
        cut = _cut_at_offsets(text, max_tokens, spans, head_share)
        if cut is not None:
            return cut
    precut_chars = max_tokens * _MAX_CHARS_PER_TOKEN
    sample = text[:precut_chars]
    sample_tokens = count_tokens(sample)
    if len(sample) == len(text) and sample_tokens <= max_tokens:
        return text
    if count_tokens(_elision_marker(len(text))) >= max_tokens:
        return ""
    chars_per_token = max(len(sample) / max(sample_tokens, 1), 0.25)
    keep = min(int(max_tokens * chars_per_token * 0.95), precut_chars, len(text) - 1)
    while keep > 0:
        candidate = _cut_middle(text, keep, head_share)
        if count_tokens(candidate) <= max_tokens:
            return candidate
        keep = int(keep * 0.85)
    return ""


def _cut_at_offsets(text: str, max_tokens: int, spans: TokenSpans, head_share: float) -> str | None:
    """``truncate_middle`` at token offsets: the first and last tokens of ``text`` (tokenised once) around
    the marker, with the same line-boundary preference; a ``Counted`` text. None: no offsets."""
    whole = len(text) <= 2 * SAMPLE_CHARS
    head_src, tail_src = (text, text) if whole else (text[:SAMPLE_CHARS], text[-SAMPLE_CHARS:])
    head_offs = spans.offsets(head_src)
    tail_offs = head_offs if whole else spans.offsets(tail_src)
    if head_offs is None or tail_offs is None:
        return None
    if whole and len(head_offs) <= max_tokens:
        return text
    marker = spans.measure(_elision_marker(int("9" * len(str(len(text))))))  # no elided count has more digits
    room = max_tokens - marker
    if marker >= max_tokens or room <= 0:
        return ""
    n_head, n_tail = len(head_offs), len(tail_offs)
    # a sample's last (head) or first (tail) token may be cut in two: never keep it
    head_n = min(int(room * head_share), n_head - (0 if whole else 1))
    tail_n = min(room - int(room * head_share), n_tail - (0 if whole else 1))
    head_end = head_offs.starts[head_n] if head_n < n_head else len(head_src)
    shift = len(text) - len(tail_src)
    tail_start = shift + (tail_offs.ends[n_tail - tail_n - 1] if tail_n < n_tail else 0)
    head = text[:head_end]
    newline = head.rfind("\n")
    if newline > head_end * 0.8:
        head = head[: newline + 1]
    tail = text[tail_start:]
    newline = tail.find("\n")
    if 0 <= newline < len(tail) * 0.2:
        tail = tail[newline + 1:]
    tokens = head_offs.overlapping(0, len(head)) + marker + tail_offs.overlapping(len(text) - len(tail) - shift,
                                                                                 len(tail_src))
    # the joins around the marker may tokenise a little differently: the rendered candidate is counted exactly
    return Counted(head + _elision_marker(len(text) - len(head) - len(tail)) + tail, tokens)


def fit_exactly(text: str, budget: int, spans: TokenSpans) -> str:
    """``text`` cut at offsets until the tokenizer's own count of it is within ``budget``."""
    limit = budget
    while limit > 0:
        cut = str(truncate_middle(text, limit, spans))
        over = spans(cut) - budget
        if over <= 0:
            return cut
        limit -= max(over, limit // 10, 1)
    return ""


def measure_with(count: TokenCounter) -> TokenCounter:
    """The counter render's searches use: a TokenSpans' cheap ``measure`` when it cuts by offsets."""
    spans = spans_of(count)
    return spans.measure if spans is not None else count


def joined(separator: str, parts: list[str], count: TokenCounter) -> str:
    """``separator.join(parts)``; with a TokenSpans that cuts by offsets, ``Counted`` with the parts' sum."""
    text = separator.join(parts)
    spans = spans_of(count)
    if spans is None or not parts:
        return text
    return Counted(text, sum(spans.measure(p) for p in parts) + (len(parts) - 1) * max(spans.measure(separator), 1))


def _cut_middle(text: str, keep_chars: int, head_share: float) -> str:
    keep_chars = min(keep_chars, len(text))  # head and tail never overlap: nothing is shown twice
    head_len = int(keep_chars * head_share)
    tail_len = keep_chars - head_len
    head = text[:head_len]
    newline = head.rfind("\n")
    if newline > head_len * 0.8:
        head = head[: newline + 1]
    tail = text[len(text) - tail_len:] if tail_len > 0 else ""
    newline = tail.find("\n")
    if 0 <= newline < tail_len * 0.2:
        tail = tail[newline + 1:]
    elided = len(text) - len(head) - len(tail)
    return head + _elision_marker(elided) + tail

