"""The leak check: a proposed skill must hold no value the grader, the archive or an answer key knows.

Forbidden values come from the grader's output (every score, field and feedback of the runs
evolved from), the archives ``materialize`` wrote (archived scores and the anonymised label map)
and an answer-key folder. Text is compared after normalising case (``casefold``), whitespace (runs
collapsed to one space) and numbers (``42``, ``42.0``, ``4.2e1``, ``+42`` and ``1,015.74`` all read
as one canonical float; the sign is ignored)::

    values = ForbiddenValues()
    values.add_number(42, "answer key expected_summary.json: rows_out")
    values.add_text("Total spend: 1015.74", "grader feedback data_cleanup")   # the string and its numbers
    leaks = values.find("Check that rows_out equals 42.0 after dropping test accounts.")
    leaks[0].value, leaks[0].found, leaks[0].source   # '42', '42.0', 'answer key expected_summary.json: rows_out'

What counts as a value (so that a method text is not refused for saying "summary" or "step 3"):
a number unless it is a whole number of magnitude at most :data:`TRIVIAL_INTEGER_MAX` (0.5 or 42
count; 0, 1, 7 do not); from an answer key, any string of at least :data:`MIN_TEXT_CHARS`
characters (a one-word answer such as "Paris" counts); from grader output and archives, a string of
at least :data:`MIN_TEXT_CHARS` characters that holds a digit or a space or is at least
:data:`MIN_WORD_CHARS` long (a label-map name counts from 3 characters). A value the task's own
instructions state (:meth:`ForbiddenValues.add_public`) is public, not a leak.
Strings match whole words only. ``collect_answer_keys`` reads JSON leaves, CSV cells below the header, workbook cells
(openpyxl) and, from other text files, ``Label: value`` values and every number.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

TRIVIAL_INTEGER_MAX = 10
MIN_TEXT_CHARS = 4
MIN_WORD_CHARS = 12
MAX_KEY_FILE_BYTES = 8 << 20
MAX_KEY_FILES = 2000

_NUMBER = re.compile(r"""(?<![\w.])[-+]?
    (?:\d{1,3}(?:,\d{3})+(?:\.\d+)? | \d+(?:\.\d+)? | \.\d+)
    (?:[eE][-+]?\d+)?(?![\w])""", re.X)
_SPACE = re.compile(r"\s+")
_LABEL_VALUE = re.compile(r"^\s*[-*]?\s*[^:\n]{1,80}:\s*(\S.*?)\s*$", re.M)


def canonical_number(value: float | int | str) -> str | None:
    """The canonical form of a number (``'42.0'`` for 42, 42.0, '4.2e1', '-42'); None if it is not one."""
    try:
        number = float(str(value).replace(",", "").replace("_", "")) if isinstance(value, str) else float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(number):
        return None
    return repr(float(f"{abs(number):.12g}"))


def normalise(text: str) -> str:
    """``text`` casefolded, with each number in canonical form and whitespace runs as one space."""
    text = _NUMBER.sub(lambda m: canonical_number(m.group(0)) or m.group(0), text.casefold())
    return _SPACE.sub(" ", text).strip()


def _is_trivial_number(canonical: str) -> bool:
    number = float(canonical)
    return number.is_integer() and number <= TRIVIAL_INTEGER_MAX


@dataclass(frozen=True)
class Leak:
    """A forbidden value found in a proposal: as its source wrote it, as the proposal wrote it, and where from."""

    value: str
    found: str
    source: str

    def sentence(self) -> str:
        written = "" if self.found == self.value else f", written {self.found!r}"
        return f"{self.value!r} ({self.source}{written})"


class ForbiddenValues:
    """Values a proposal must not contain, each with where it came from."""

    def __init__(self) -> None:
        self.numbers: dict[str, tuple[str, str]] = {}  # canonical -> (as written, source)
        self.texts: dict[str, tuple[str, str]] = {}  # normalised -> (as written, source)
        self.public: list[str] = []  # normalised texts the agent was shown (a task's instructions)

    def add_public(self, text: str) -> None:
        """Text the agent itself was given (a task's instructions): a value that appears in it as a
        whole word is public, not a leak (a column name, a figure the task states)."""
        self.public.append(normalise(text))

    def _is_public(self, value: str) -> bool:
        pattern = re.compile(r"(?<!\w)" + re.escape(value) + r"(?!\w)")
        return any(pattern.search(text) for text in self.public)

    def __len__(self) -> int:
        return len(self.numbers) + len(self.texts)

    def add_number(self, value: Any, source: str) -> None:
        """Forbid a number (bools and trivial whole numbers are not values)."""
        if isinstance(value, bool):
            return
        canonical = canonical_number(value)
        if canonical is not None and not _is_trivial_number(canonical):
            self.numbers.setdefault(canonical, (str(value), source))

    def add_string(self, value: str, source: str, *, min_chars: int | None = None) -> None:
        """Forbid a string as a whole (words under the size rule are not values; see the module doc)."""
        norm = normalise(value)
        if min_chars is not None:
            keep = len(norm) >= min_chars
        else:
            keep = len(norm) >= MIN_TEXT_CHARS and (any(c.isdigit() for c in norm) or " " in norm
                                                     or len(norm) >= MIN_WORD_CHARS)
        if keep and canonical_number(value.strip()) is None:  # a bare number is kept as a number
            self.texts.setdefault(norm, (value.strip(), source))
        elif canonical_number(value.strip()) is not None:
            self.add_number(value.strip(), source)

    def add_text(self, value: str, source: str) -> None:
        """Forbid free text (feedback, notes): the whole string and every number in it."""
        self.add_string(value, source)
        for match in _NUMBER.finditer(value):
            self.add_number(match.group(0), source)

    def add_leaves(self, document: Any, source: str, path: str = "", *, min_chars: int | None = None) -> None:
        """Forbid every leaf of a parsed JSON document (numbers and strings; keys are names, not values)."""
        if isinstance(document, dict):
            for key, value in document.items():
                self.add_leaves(value, source, f"{path}.{key}" if path else str(key), min_chars=min_chars)
        elif isinstance(document, list):
            for index, value in enumerate(document):
                self.add_leaves(value, source, f"{path}[{index}]", min_chars=min_chars)
        elif isinstance(document, str):
            self.add_string(document, f"{source}: {path}" if path else source, min_chars=min_chars)
        elif isinstance(document, (int, float)):
            self.add_number(document, f"{source}: {path}" if path else source)

    def find(self, text: str) -> list[Leak]:
        """Every forbidden value in ``text`` (numbers by value, strings as whole words), in text order."""
        leaks: list[tuple[int, Leak]] = []
        seen: set[str] = set()
        for match in _NUMBER.finditer(text):
            canonical = canonical_number(match.group(0))
            if canonical in self.numbers and canonical not in seen and not self._is_public(canonical):
                seen.add(canonical)
                written, source = self.numbers[canonical]
                leaks.append((match.start(), Leak(written, match.group(0), source)))
        norm = normalise(text)
        for value, (written, source) in self.texts.items():
            found = re.search(r"(?<!\w)" + re.escape(value) + r"(?!\w)", norm)
            if found and value not in seen and not self._is_public(value):
                seen.add(value)
                start, as_written = _original_span(text, value, found.group(0))
                leaks.append((start, Leak(written, as_written, source)))
        return [leak for _, leak in sorted(leaks, key=lambda pair: pair[0])]


_ANY_NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
_CANONICAL = re.compile(r"\d+\.\d+(?:e[-+]\d+)?")


def _original_span(text: str, value: str, fallback: str) -> tuple[int, str]:
    """Where the normalised ``value`` is in ``text`` as written (its offset and its text), else the fallback."""
    parts = []
    for word in value.split(" "):
        pieces, last = [], 0
        for m in _CANONICAL.finditer(word):
            pieces += [re.escape(word[last:m.start()]), _ANY_NUMBER]
            last = m.end()
        parts.append("".join(pieces) + re.escape(word[last:]))
    pattern = re.compile(r"(?<!\w)" + r"\s+".join(parts) + r"(?!\w)", re.I)
    for match in pattern.finditer(text):
        if normalise(match.group(0)) == value:
            return match.start(), match.group(0)
    return len(text), fallback


# --- where forbidden values come from --------------------------------------------------------------


def add_grades(values: ForbiddenValues, grades: dict[str, Any], source: str) -> None:
    """The grader's answers of one task (``{"revised": {"score", "extra", "feedback"}, ...}``)."""
    for which, grade in grades.items():
        if not isinstance(grade, dict):
            continue
        where = f"grader output {source} ({which})"
        values.add_number(grade.get("score"), f"{where}: score")
        values.add_leaves(grade.get("extra") or {}, where)
        if isinstance(grade.get("feedback"), str):
            values.add_text(grade["feedback"], f"{where}: feedback")


def add_archive(values: ForbiddenValues, archive: dict[str, Any], source: str) -> None:
    """Archived scores and the anonymised label map (each original rollout name, from 3 characters)."""
    for label, score in (archive.get("scores") or {}).items():
        values.add_number(score, f"archived score {source} {label}")
    for label, original in (archive.get("label_map") or {}).items():
        if isinstance(original, str):
            values.add_string(original, f"label map {source} {label}", min_chars=3)


def collect_answer_keys(values: ForbiddenValues, folder: Path) -> int:
    """Add every value of the answer-key files below ``folder``; returns how many files were read."""
    count = 0
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file() and not p.is_symlink()):
        if count >= MAX_KEY_FILES:
            break
        if path.stat().st_size > MAX_KEY_FILE_BYTES:
            continue
        source = f"answer key {path.relative_to(folder).as_posix()}"
        count += 1
        suffix = path.suffix.lower()
        if suffix in (".xlsx", ".xlsm"):
            _workbook_values(values, path, source)
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if suffix in (".json", ".jsonl"):
            for document in _json_documents(text):
                values.add_leaves(document, source, min_chars=MIN_TEXT_CHARS)
        elif suffix in (".csv", ".tsv"):
            rows = csv.reader(io.StringIO(text), delimiter="\t" if suffix == ".tsv" else ",")
            next(rows, None)  # the header: column names are names, as a JSON key is, not values
            for row in rows:
                for cell in row:
                    values.add_string(cell, source, min_chars=MIN_TEXT_CHARS)
        elif suffix in (".py", ".sh", ".js"):
            continue  # a grader program: its names are code, its keys are read from the data beside it
        else:
            for match in _LABEL_VALUE.finditer(text):
                values.add_string(match.group(1), source, min_chars=MIN_TEXT_CHARS)
            for match in _NUMBER.finditer(text):
                values.add_number(match.group(0), source)
    return count


def _json_documents(text: str) -> Iterable[Any]:
    try:
        yield json.loads(text)
        return
    except ValueError:
        pass
    for line in text.splitlines():
        try:
            yield json.loads(line)
        except ValueError:
            continue


def _workbook_values(values: ForbiddenValues, path: Path, source: str) -> None:
    try:
        from openpyxl import load_workbook
    except ImportError:  # the [office] extra is not installed: the workbook's values cannot be read
        return
    try:
        book = load_workbook(path, data_only=True, read_only=True)
    except Exception:  # noqa: BLE001 - an unreadable key file adds nothing
        return
    try:
        for sheet in book.worksheets:
            for row in sheet.iter_rows(values_only=True):
                for cell in row:
                    if isinstance(cell, (int, float)):
                        values.add_number(cell, f"{source} ({sheet.title})")
                    elif isinstance(cell, str):
                        values.add_string(cell, f"{source} ({sheet.title})")
    finally:
        book.close()
