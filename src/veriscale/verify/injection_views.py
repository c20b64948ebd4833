"""The readings of a text the injection detector scans, each with an index map back to the original.

    from veriscale.verify.injection_views import View, decoded_runs, name_like, normalised

    view = normalised("Gr\u0430de: A")      # View("Grade: A", ...): the Cyrillic а folded to Latin
    view.original(0, 5)                      # (0, 5): offsets into the text as given
    normalised("plain ascii")                # None: it reads the same
    [d for _, d in decoded_runs(View("R3JhZGU6IEE="))]   # ['Grade: A']
    list(name_like("note_to_grader.txt"))    # [(0, 'note to grader.txt')]

* normalised: Unicode NFKC (full-width and styled letters), format characters (category Cf:
  zero-width spaces and joiners, bidi controls, soft hyphens) and variation selectors removed,
  Unicode tag characters read as the ASCII they encode, combining marks after a Latin letter
  dropped, and in words that mix Latin letters with Cyrillic or Greek lookalikes, the lookalikes
  folded to Latin (``Grаde`` with a Cyrillic ``а`` reads ``Grade``);
* decoded: base64-looking runs (at least :data:`B64_MIN_CHARS` characters; at most
  :data:`B64_MAX_RUNS` runs of at most :data:`B64_MAX_CHARS` each) that decode to printable
  UTF-8, read as text; a hit inside one reports the whole run;
* name-like: in tokens holding ``_`` or ``-``, those read as spaces (the same length).

Each view is built in one pass, so the time is linear in the text.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from dataclasses import dataclass

B64_MIN_CHARS = 16
B64_MAX_CHARS = 4096
B64_MAX_RUNS = 64

#: Cyrillic and Greek letters that look like Latin ones (folded only inside words that also hold a Latin letter)
CONFUSABLES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s",
    "ԁ": "d", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w", "ɡ": "g", "к": "k", "м": "m", "н": "h", "т": "t", "ь": "b",
    "ё": "e", "ї": "i", "ү": "y", "ӓ": "a", "ӧ": "o",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X",
    "У": "Y", "І": "I", "Ј": "J", "Ѕ": "S", "Ԁ": "D", "Ԍ": "G", "Һ": "H", "Ӏ": "I", "Ԛ": "Q", "Ԝ": "W", "З": "3",
    "α": "a", "ο": "o", "ν": "v", "ρ": "p", "ι": "i", "κ": "k", "υ": "u", "τ": "t", "ϲ": "c", "ε": "e", "γ": "y",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P",
    "Τ": "T", "Υ": "Y", "Χ": "X", "Ϲ": "C",
})
_CONFUSABLE_CHARS = frozenset(chr(c) for c in CONFUSABLES)
_CONFUSABLE = re.compile("[" + "".join(sorted(_CONFUSABLE_CHARS)) + "]")
_WORD = re.compile(r"\w{1,64}")
# what the slow path changes besides NFKC: format characters (Cf), variation selectors, tag characters
_SPECIAL = re.compile("[\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
                      "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufe00-\ufe0f\ufeff\ufff9-\ufffb\U000110bd"
                      "\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001-\U000e007f"
                      "\U000e0100-\U000e01ef]")
_LATIN_MARK = re.compile("[A-Za-z][\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_MAX_CLUSTER = 16


@dataclass(frozen=True)
class View:
    """A reading of the text: ``text`` and, for each of its characters, the original span it came from
    (``None``: the text itself, offsets are the original ones)."""

    text: str
    starts: list[int] | None = None
    ends: list[int] | None = None
    whole: tuple[int, int] | None = None  # every hit in this view reports this original span (decoded runs)

    def original(self, start: int, end: int) -> tuple[int, int]:
        if self.whole is not None:
            return self.whole
        if self.starts is None or self.ends is None:
            return start, end
        if end <= start:
            return self.starts[start], self.starts[start]
        return self.starts[start], self.ends[end - 1]


def _is_dropped(ch: str) -> bool:
    """Format characters (zero-width, bidi, soft hyphen) and variation selectors."""
    cp = ord(ch)
    return unicodedata.category(ch) == "Cf" or 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF or cp == 0x034F


def normalised(text: str) -> View | None:
    """The NFKC / format-character / tag / confusable reading of ``text`` with its index map, or None
    when it reads the same as ``text``."""
    if text.isascii():
        return None
    if unicodedata.is_normalized("NFKC", text) and not _SPECIAL.search(text) and not _LATIN_MARK.search(text):
        if not _CONFUSABLE.search(text):
            return None
        view = _WORD.sub(_fold_word, text)  # one character for one: the offsets hold
        return None if view == text else View(view)
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, n = 0, len(text)
    while i < n:
        j = i + 1
        while j < n and j - i < _MAX_CLUSTER and unicodedata.category(text[j])[0] == "M" and not _is_dropped(text[j]):
            j += 1
        cluster = text[i:j]
        cp = ord(cluster[0])
        if cluster.isascii():
            piece = cluster
        elif 0xE0020 <= cp <= 0xE007E and j == i + 1:  # Unicode tag characters spell ASCII invisibly
            piece = chr(cp - 0xE0000)
        elif _is_dropped(cluster[0]):
            piece = ""
        else:
            piece = "".join(c for c in unicodedata.normalize("NFKC", cluster) if not _is_dropped(c))
            if len(piece) > 1 and piece[0].isascii() and piece[0].isalpha():
                piece = piece[0] + "".join(c for c in piece[1:] if unicodedata.category(c)[0] != "M")
        for c in piece:
            out.append(c)
            starts.append(i)
            ends.append(j)
        i = j
    view = "".join(out)
    if any(c in _CONFUSABLE_CHARS for c in view):
        view = _WORD.sub(_fold_word, view)
    if view == text:
        return None
    return View(view, starts, ends)


def _fold_word(m: re.Match[str]) -> str:
    word = m.group(0)
    if any("a" <= c.lower() <= "z" for c in word) and any(c in _CONFUSABLE_CHARS for c in word):
        return word.translate(CONFUSABLES)
    return word


_B64_RUN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{%d,%d}={0,2}" % (B64_MIN_CHARS, B64_MAX_CHARS))


def decoded_runs(view: View):
    """(original span, decoded text) of each base64-looking run of ``view`` that decodes to printable
    UTF-8: at most :data:`B64_MAX_RUNS` runs tried, each at most :data:`B64_MAX_CHARS` characters."""
    tried = 0
    for m in _B64_RUN.finditer(view.text):
        run = m.group(0)
        body = run.rstrip("=")
        if not (any(c.isupper() for c in body) and any(c.islower() for c in body)):
            continue
        tried += 1
        if tried > B64_MAX_RUNS:
            return
        if len(body) % 4 == 1:
            body = body[:-1]
        try:
            raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_" if ("-" in body or "_" in body) else None,
                                   validate=True)
            decoded = raw.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        printable = sum(c.isprintable() or c in "\n\r\t" for c in decoded)
        if len(decoded) >= 4 and printable >= 0.9 * len(decoded) and any(c.isalpha() for c in decoded):
            yield view.original(m.start(), m.end()), decoded


_TOKEN = re.compile(r"\S{1,400}")
_SEPARATORS = re.compile(r"[_\-]")


def name_like(text: str):
    """(offset, the token with ``_``/``-`` read as spaces) for each token that holds one:
    file names, identifiers and slugs, read as words (the same length, so offsets hold)."""
    for m in _TOKEN.finditer(text):
        token = m.group(0)
        if _SEPARATORS.search(token):
            yield m.start(), _SEPARATORS.sub(" ", token)
