"""A model's tokenizer for rendering: each distinct text tokenised once, cuts made at token offsets.

    spans = TokenSpans(source)            # source: a tokenizer that gives token ids (a server's /tokenize)
    spans("some text")                    # its exact token count (asked once per distinct text)
    spans.offsets(text)                   # where each of its tokens starts and ends (TokenOffsets)
    with spans.primed(whole): ...         # tokenise a text once; its substrings count and cut for free
    spans.measure(piece)                  # the cheap count render's searches use (see below)
    spans.requests                        # tokenizer requests sent so far

``render.py`` asks a ``TokenSpans`` (when it cuts by offsets, :meth:`TokenSpans.cuts_by_offsets`) for
token offsets instead of counting every cut it tries: a text is tokenised once, the character offset of
each token is found once (the ids' pieces, learnt once per id from the server's detokenizer), and a
cut at N tokens is a cut at the N-th offset. Inside its searches render counts with :meth:`measure`:
a text cut at offsets carries its count (``Counted``), a substring of a primed text counts the tokens
its span overlaps, anything else is counted exactly. The rendered candidate itself is counted exactly
(the budget holds by the server's own count).

Ids that spell part of a character (byte tokens) cannot be decoded alone: a run of them is decoded
as one group and its tokens share its span, so a cut never falls inside it. Which ids a process
learnt to spell alone can depend on what it tokenised before, so in non-ASCII text a cut may move
by a few characters from one process to another; in ASCII text it never does.

A source without token ids (a server with a count route only, or none) gives no offsets; render then
searches cuts by counting, as it always did, over this object's memo of exact counts.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from contextlib import contextmanager
from typing import Callable, Iterator, Protocol, Sequence

#: How deep a failed detokenize of new ids is split in halves before the ids left are treated as
#: unknown pieces (byte tokens of a character cut in two cannot be decoded alone).
MAX_SPLIT_DEPTH = 3
#: Characters of texts whose counts and offsets are kept; past it they are forgotten (a long-lived
#: process, such as a reward server, renders new texts for ever). What ids spell is always kept.
MEMO_CHARS = 32_000_000


class TokenSource(Protocol):
    """What a backend offers: token ids of a text, the text of groups of ids, and an exact count."""

    def token_ids(self, text: str) -> list[int] | None:
        """The ids of ``text`` (no special tokens added); None when the backend gives no ids."""

    def token_pieces(self, groups: Sequence[Sequence[int]]) -> list[str] | None:
        """The text of each group of ids, in one request; None when the backend cannot say."""

    def count(self, text: str) -> int:
        """The exact count of ``text`` (or the estimate the backend falls back to)."""

    @property
    def requests(self) -> int:
        """Tokenizer requests sent so far."""


class Counted(str):
    """A text that carries its token count (``tokens``), as render's offset cuts estimate it."""

    tokens: int

    def __new__(cls, text: str, tokens: int) -> "Counted":
        obj = super().__new__(cls, text)
        obj.tokens = tokens
        return obj


@dataclass(frozen=True)
class TokenOffsets:
    """Where each token of a text starts and ends (characters); both lists are non-decreasing.

    Tokens whose pieces could not be learnt one by one share their group's span."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.starts)

    def overlapping(self, a: int, b: int) -> int:
        """Tokens that overlap characters ``[a, b)``."""
        if b <= a:
            return 0
        return max(0, bisect_left(self.starts, b) - bisect_right(self.ends, a))


class TokenSpans:
    """Exact counts and token offsets of texts, each distinct text tokenised once (thread-safe)."""

    def __init__(self, source: TokenSource) -> None:
        self.source = source
        self._lock = threading.RLock()
        self._counts: dict[str, int] = {}
        self._ids: dict[str, list[int] | None] = {}
        self._offsets: dict[str, TokenOffsets | None] = {}
        self._pieces: dict[int, str] = {}
        self._unknown: set[int] = set()  # ids whose piece cannot be decoded alone
        self._primed: list[tuple[str, TokenOffsets]] = []
        self._has_ids: bool | None = None
        self._cuts: bool | None = None
        self._memo_chars = 0

    @property
    def requests(self) -> int:
        """Tokenizer requests the source has sent so far."""
        return self.source.requests

    # -- exact counts -------------------------------------------------------------------------
    def __call__(self, text: str) -> int:
        """The exact token count of ``text``, asked once per distinct text."""
        text = str(text)
        if not text:
            return 0
        with self._lock:
            found = self._counts.get(text)
            if found is None:
                ids = self._token_ids(text)
                found = len(ids) if ids is not None else self.source.count(text)
                self._counts[text] = found
            return found

    def known_ids(self, text: str) -> tuple[bool, list[int] | None]:
        """``(True, ids)`` when ``text`` was tokenised already (ids None: the source gave none), else ``(False, None)``."""
        with self._lock:
            return (text in self._ids, self._ids.get(text))

    def remember_ids(self, text: str, ids: list[int] | None) -> None:
        """Keep ids another caller of the same tokenizer got for ``text`` (so it is not asked again)."""
        with self._lock:
            self._ids.setdefault(text, ids)

    def cuts_by_offsets(self) -> bool:
        """True when the source gives token ids and spells them back (then texts are cut at token
        offsets); asked once, on a newline."""
        with self._lock:
            if self._cuts is None:
                self._cuts = self._token_ids("\n") is not None and self._own_offsets("\n") is not None
            return self._cuts

    def _token_ids(self, text: str) -> list[int] | None:
        if text not in self._ids:
            self._memo_chars += len(text)
            if self._memo_chars > MEMO_CHARS:
                for memo in (self._counts, self._ids, self._offsets):
                    memo.clear()
                self._memo_chars = len(text)
            ids = self.source.token_ids(text) if self._has_ids is not False else None
            if self._has_ids is None:
                self._has_ids = ids is not None
            self._ids[text] = ids
            if ids is not None:
                self._counts[text] = len(ids)
        return self._ids[text]

    # -- offsets ------------------------------------------------------------------------------
    def offsets(self, text: str) -> TokenOffsets | None:
        """Where each token of ``text`` starts and ends; None when the source cannot say. A substring
        of a primed text takes the primed text's tokens over its span (no request); any other text is
        tokenised itself, once."""
        text = str(text)
        with self._lock:
            if text not in self._offsets:
                self._offsets[text] = self._within_primed(text) or self._own_offsets(text)
            return self._offsets[text]

    def _own_offsets(self, text: str) -> TokenOffsets | None:
        ids = self._token_ids(text)
        return None if ids is None else self._align(text, ids)

    def _within_primed(self, text: str) -> TokenOffsets | None:
        for primed, offs in self._primed:
            at = primed.find(text)
            if at >= 0:
                end = at + len(text)
                first, last = bisect_right(offs.ends, at), bisect_left(offs.starts, end)
                return TokenOffsets(tuple(max(s - at, 0) for s in offs.starts[first:last]),
                                    tuple(min(e - at, len(text)) for e in offs.ends[first:last]))
        return None

    @contextmanager
    def primed(self, text: str) -> Iterator[bool]:
        """Within the block, substrings of ``text`` are counted and cut off its tokens (``text`` is
        tokenised once); yields False when its offsets cannot be found."""
        text = str(text)
        with self._lock:
            found = self._offsets[text] if text in self._offsets else (self._own_offsets(text) if text else None)
            self._offsets[text] = found
            entry = (text, found) if found is not None else None
            if entry is not None:
                self._primed.insert(0, entry)
        try:
            yield entry is not None
        finally:
            if entry is not None:
                with self._lock:
                    self._primed.remove(entry)

    def measure(self, text: str) -> int:
        """A count for render's searches: a ``Counted`` text's own estimate, an exact count already
        known, the tokens a primed text's span overlaps, else the exact count (asked once)."""
        if isinstance(text, Counted):
            return text.tokens
        if not text:
            return 0
        with self._lock:
            known = self._counts.get(text)
            if known is not None:
                return known
            # whitespace alone merges with its neighbours in a primed text: it is counted itself
            offs = self._offsets.get(text) or (self._within_primed(text) if not text.isspace() else None)
            if offs is not None:
                return len(offs)
        return self(text)

    def _align(self, text: str, ids: list[int]) -> TokenOffsets | None:
        """Token offsets of ``text`` from its ids and the ids' pieces; None when they do not spell it."""
        self._learn([i for i in dict.fromkeys(ids) if i not in self._pieces and i not in self._unknown])
        # runs of ids whose pieces are unknown are decoded as whole groups (they spell whole characters)
        units: list[tuple[int, int, str | None]] = []  # (first id index, ids in the unit, its text)
        i = 0
        while i < len(ids):
            if ids[i] in self._pieces:
                units.append((i, 1, self._pieces[ids[i]]))
                i += 1
                continue
            j = i
            while j < len(ids) and ids[j] not in self._pieces:
                j += 1
            units.append((i, j - i, None))
            i = j
        runs = list(dict.fromkeys(tuple(ids[s:s + n]) for s, n, piece in units if piece is None))
        run_text: dict[tuple[int, ...], str] = {}
        if runs:
            texts = self.source.token_pieces(runs)
            if texts is None or len(texts) != len(runs):
                return None
            run_text = dict(zip(runs, texts))
        starts: list[int] = []
        ends: list[int] = []
        pos = 0
        for s, n, piece in units:
            piece = piece if piece is not None else run_text[tuple(ids[s:s + n])]
            if pos == 0 and piece.startswith(" ") and not text.startswith(" ") and text.startswith(piece[1:]):
                piece = piece[1:]  # a SentencePiece model's space before the first word
            if not text.startswith(piece, pos):
                return None
            starts.extend([pos] * n)
            ends.extend([pos + len(piece)] * n)
            pos += len(piece)
        if pos != len(text):
            return None
        return TokenOffsets(tuple(starts), tuple(ends))

    def _learn(self, ids: list[int], depth: int = 0) -> None:
        """Learn the pieces of ``ids`` in one request; a failed one is split in halves (to a depth)."""
        if not ids:
            return
        texts = self.source.token_pieces([[i] for i in ids])
        if texts is not None and len(texts) == len(ids):
            for i, piece in zip(ids, texts):
                if piece:
                    self._pieces[i] = piece
                else:
                    self._unknown.add(i)  # an empty piece (a special token) is decoded with its run
            return
        if len(ids) == 1 or depth >= MAX_SPLIT_DEPTH:
            self._unknown.update(ids)
            return
        mid = len(ids) // 2
        self._learn(ids[:mid], depth + 1)
        self._learn(ids[mid:], depth + 1)


def spans_of(count: Callable[[str], int]) -> TokenSpans | None:
    """``count`` as a ``TokenSpans`` that cuts by offsets, else None (render searches by counting)."""
    return count if isinstance(count, TokenSpans) and count.cuts_by_offsets() else None
