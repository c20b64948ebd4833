"""Office files are data: refuse one that makes its reader open something outside it.

A delivered or archived office file (any zip holding ``[Content_Types].xml``: xlsx, xlsm, docx,
pptx, whatever its name) is refused when it holds

- an external workbook link: an ``xl/externalLinks/`` part, or an ``externalReference``,
  ``externalBook`` or ``externalLink`` element in any part (openpyxl, and so the ``formulas``
  library, follow ``externalReferences`` by relationship id whatever the relationship's type);
- a relationship with ``TargetMode="External"`` of any type but ``hyperlink`` (an external
  template, OLE object, frame, sub-document, linked picture, video or data source is a file a
  reader opens; a hyperlink is opened only when a person clicks it, so it is kept);
- a formula (``<f>``, a defined name, a data-validation or conditional-format formula, a chart
  series) that refers to another workbook, in any form: ``[1]Sheet!A1``, ``[book.xlsx]Sheet!A1``,
  ``'../dir/[book.xlsx]Sheet'!A1``, ``'C:\\dir\\book.xlsx'!Name``, also inside a string
  (``INDIRECT("'../[book.xlsx]S'!A1")``, which ``formulas`` resolves), a DDE link
  (``=cmd|'/c calc'!A0``) or a function that fetches (``WEBSERVICE``, ``RTD``, ``CALL``,
  ``REGISTER.ID``, ``SQL.REQUEST``);
- a data connection part (``xl/connections.xml``) or a Word field that pulls a file in
  (``INCLUDETEXT``, ``INCLUDEPICTURE``, ``LINK``, ``IMPORT``, ``DDE``, ``DDEAUTO``);
- a DTD (``<!DOCTYPE``) in any XML part: office files never need one, and XML readers may
  expand or fetch what it declares.

Every part is inflated once under the caps of :mod:`.zip_limits` (the sizes a header declares
are never trusted) and XML parts are read by a streaming expat parser that stops at a DTD before
any declaration in it is processed. A file that cannot be checked (over a cap, a damaged zip, an
XML part that is not well-formed) is reported with ``checked=False``: the delivery gate and the
grading stage refuse it too; ``materialize`` keeps it (its view already says why it was not
opened). Plain zips without ``[Content_Types].xml`` are data and are not looked into (nested zips
are never unpacked)::

    refusal = office_refusal(Path("model.xlsx").read_bytes(), "model.xlsx")
    refusal.sentence   # "model.xlsx was refused: its part 'xl/externalLinks/externalLink1.xml' links it to
                       #  another workbook; deliver a file that holds its own values, not references to other files"
    refused = refuse_office_files(Path("out/deliverables"))   # [(rel, refusal)], those files removed
"""

from __future__ import annotations

import io
import os
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator
from xml.parsers import expat

from veriscale.harness.safe_fs import UnsafePath, open_dir_beneath, open_regular_beneath, walk_entries
from veriscale.harness.safe_names import shown_name
from veriscale.harness.safe_write import remove_beneath
from veriscale.harness.workspace.zip_limits import (
    RAISE_IT, ZIP_ERRORS, ArchiveRefused, Inflation, ZipLimits, cap_text,
)

CONTENT_TYPES = "[content_types].xml"
FIX = "deliver a file that stands alone (its own values; no links to other files, no DTD)"
#: The largest file the check opens at all (a zip over the per-file cap is refused unread).
MAX_OPEN_BYTES = 1 << 40

_NS_SEP = "\x01"
_MATH_NS = "http://schemas.openxmlformats.org/officeDocument/2006/math"
_FORMULA_ELEMENTS = frozenset({"f", "definedName", "formula", "formula1", "formula2"})
_EXTERNAL_ELEMENTS = frozenset({"externalReference", "externalReferences", "externalBook", "externalLink"})
_XML_SUFFIXES = (".xml", ".rels", ".vml")
_XML_STARTS = (b"<", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\x00<")
_FIELD_WORDS = frozenset({"INCLUDETEXT", "INCLUDEPICTURE", "INCLUDE", "LINK", "IMPORT", "DDE", "DDEAUTO"})

# A quoted reference prefix whose name holds a character no sheet name may hold: a path, a drive,
# a URL or a [book] (Excel forbids [ ] / \ : ? * in sheet names).
_QUOTED_EXTERNAL = re.compile(r"'(?:[^']|'')*[\[\]/\\:?*](?:[^']|'')*'\s*!")
# [book]Sheet! or [1]! unquoted; a table's structured reference (Table1[Col]) is never followed by "!".
_BRACKET_EXTERNAL = re.compile(r"\[[^\[\]]*\][^\s!'\"(),;=+\-*/^&<>{}\[\]]*!")
_FETCHING_FUNCTION = re.compile(r"(?<![A-Za-z0-9_.])(?:_xlfn\.)?(WEBSERVICE|RTD|CALL|REGISTER(?:\.ID)?|SQL\.REQUEST)\s*\(",
                                re.IGNORECASE)
_STRING = re.compile(r'"(?:[^"]|"")*"')
_SHOWN_CHARS = 120


@dataclass(frozen=True)
class OfficeRefusal:
    """Why an office file was refused: ``found`` names the part and what it holds.

    ``checked=False`` when the file could not be checked at all (a cap, a damaged zip).
    """

    what: str
    found: str
    checked: bool = True

    @property
    def sentence(self) -> str:
        """One sentence naming the file, what was found, and what to do."""
        if not self.checked:
            return f"{self.what} was refused: it could not be checked for links to other files, since {self.found}"
        return f"{self.what} was refused: {self.found}; {FIX}"


class _Found(Exception):
    """Raised inside a part's scan with what was found (ends the scan of the file)."""


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "...")


def external_formula_reason(formula: str) -> str | None:
    """Why ``formula`` reaches outside its workbook (a phrase), or None when it stays inside it."""
    outside_strings = _STRING.sub('""', formula)
    if "|" in outside_strings:
        return "is a DDE link to another program"
    if _QUOTED_EXTERNAL.search(formula) or _BRACKET_EXTERNAL.search(formula):
        return "refers to another workbook"
    fetch = _FETCHING_FUNCTION.search(outside_strings)
    if fetch:
        return f"calls {fetch.group(1).upper()}, which fetches from outside the workbook"
    return None


class _PartScan:
    """Streams one XML part through expat and raises ``_Found`` at the first outside reference."""

    def __init__(self, part: str) -> None:
        self.part = part
        lowered = part.lower()
        self.is_rels = lowered.endswith(".rels")
        self.is_word = lowered.startswith("word/")
        self.parser = expat.ParserCreate(namespace_separator=_NS_SEP)
        self.parser.StartDoctypeDeclHandler = self._doctype
        self.parser.StartElementHandler = self._start
        # ends and text are followed only inside a formula (or in Word parts, for fields)
        self.parser.EndElementHandler = self._end if self.is_word else None
        self.parser.buffer_text = True
        self.collecting: list[str] | None = None  # text of the formula element being read
        self.formula_of: tuple[str, str, str] = ("", "", "")  # (element's full name, where, local name)
        self.nested = 0  # elements of the formula element's own name open inside it
        self.cell = ""
        self.field: list[str] | None = None  # a Word field's instruction being read
        self.in_instr = False

    def feed(self, data: bytes, final: bool = False) -> None:
        self.parser.Parse(data, final)

    def _doctype(self, name, *_args) -> None:
        raise _Found(f"its part '{self.part}' declares a DTD (<!DOCTYPE {name}>), which office files never need "
                     "and XML readers may expand or fetch")

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        ns, _, local = name.rpartition(_NS_SEP)
        if self.collecting is not None and name == self.formula_of[0]:
            self.nested += 1
        if local in _EXTERNAL_ELEMENTS:
            raise _Found(f"its part '{self.part}' holds an {local} element, which links it to another workbook")
        if self.is_rels and local == "Relationship":
            mode = attrs.get("TargetMode", "")
            kind = attrs.get("Type", "").rstrip("/").rsplit("/", 1)[-1]
            if mode.strip().lower() == "external" and kind.lower() != "hyperlink":
                raise _Found(f"its part '{self.part}' has an external relationship of type '{kind}' to "
                             f"{_shown(attrs.get('Target', ''))}, a file a reader would open")
            return
        if local == "c" and "r" in attrs:
            self.cell = attrs["r"]
        if local in _FORMULA_ELEMENTS and ns != _MATH_NS and self.collecting is None:
            where = f"cell {self.cell}" if local == "f" and self.cell else local
            if local == "definedName":
                where = f"defined name {_shown(attrs.get('name', ''))}"
            self.collecting, self.formula_of, self.nested = [], (name, where, local), 0
            self.parser.CharacterDataHandler = self._text
            self.parser.EndElementHandler = self._end
        if self.is_word:
            self._word_start(local, attrs)

    def _word_start(self, local: str, attrs: dict[str, str]) -> None:
        if local == "fldSimple":
            self._check_field(next((v for k, v in attrs.items() if k.rpartition(_NS_SEP)[2] == "instr"), ""))
        elif local == "fldChar":
            kind = next((v for k, v in attrs.items() if k.rpartition(_NS_SEP)[2] == "fldCharType"), "")
            if kind == "begin":
                self.field = []
            elif kind in ("separate", "end") and self.field is not None:
                self._check_field("".join(self.field))
                self.field = None
        elif local == "instrText":
            self.in_instr = True
            self.parser.CharacterDataHandler = self._text
            if self.field is None:
                self.field = []

    def _check_field(self, instruction: str) -> None:
        words = instruction.split()
        if words and words[0].upper() in _FIELD_WORDS:
            raise _Found(f"its part '{self.part}' holds the field {_shown(instruction)}, which pulls another file in")

    def _end(self, name: str) -> None:
        if self.collecting is not None and name == self.formula_of[0]:
            if self.nested:
                self.nested -= 1
            else:
                formula = "".join(self.collecting)
                self.collecting = None
                if not self.in_instr:
                    self.parser.CharacterDataHandler = None
                if not self.is_word:
                    self.parser.EndElementHandler = None
                reason = external_formula_reason(formula)
                if reason:
                    raise _Found(f"a formula in '{self.part}' ({self.formula_of[1]}) {reason}: {_shown(formula)}")
        if name.rpartition(_NS_SEP)[2] == "instrText":
            self.in_instr = False
            if self.collecting is None:
                self.parser.CharacterDataHandler = None

    def _text(self, data: str) -> None:
        if self.collecting is not None:
            self.collecting.append(data)
        if self.in_instr and self.field is not None:
            self.field.append(data)

    def finish(self) -> None:
        self.feed(b"", True)
        if self.field:
            self._check_field("".join(self.field))


def _content_types(archive: zipfile.ZipFile, info: zipfile.ZipInfo, inflation: Inflation) -> tuple[dict, dict]:
    """({extension: type}, {part name: type}) of the package; raises ``_Found`` on a DTD in it."""
    defaults: dict[str, str] = {}
    overrides: dict[str, str] = {}
    scan = _PartScan(info.filename)
    previous = scan.parser.StartElementHandler

    def start(name: str, attrs: dict[str, str]) -> None:
        local = name.rpartition(_NS_SEP)[2]
        if local == "Default":
            defaults[attrs.get("Extension", "").lower()] = attrs.get("ContentType", "")
        elif local == "Override":
            overrides[attrs.get("PartName", "").lstrip("/").lower()] = attrs.get("ContentType", "")
        previous(name, attrs)

    scan.parser.StartElementHandler = start
    _feed(scan, inflation.chunks(archive, info), declared_xml=True)
    return defaults, overrides


def _feed(scan: _PartScan, chunks: Iterator[bytes], *, declared_xml: bool) -> None:
    """Parse the part's chunks; a part that only looks like XML and does not parse is checked for a DTD."""
    seen: list[bytes] = []
    try:
        for chunk in chunks:
            if not declared_xml:
                seen.append(chunk)
            scan.feed(chunk)
        scan.finish()
    except expat.ExpatError as exc:
        if declared_xml:
            raise _Unchecked(f"its part '{scan.part}' is not well-formed XML ({expat.ErrorString(exc.code)}, "
                             f"line {exc.lineno})") from None
        for chunk in chunks:  # finish inflating (counted), then look for a DTD by its bytes
            seen.append(chunk)
        data = b"".join(seen)
        if re.search(rb"<!doctype", data, re.IGNORECASE) or re.search(rb"<\x00!\x00[dD]\x00[oO]\x00[cC]\x00", data):
            raise _Found(f"its part '{scan.part}' declares a DTD (<!DOCTYPE>), which office files never need "
                         "and XML readers may expand or fetch") from None


class _Unchecked(Exception):
    """The file cannot be checked (the message says why)."""


def _is_xml(part: str, defaults: dict[str, str], overrides: dict[str, str]) -> bool:
    lowered = part.lower()
    kind = overrides.get(lowered) or defaults.get(lowered.rsplit(".", 1)[-1] if "." in lowered else "", "")
    return lowered.endswith(_XML_SUFFIXES) or "xml" in kind.lower()


def _scan_package(archive: zipfile.ZipFile, members: list[zipfile.ZipInfo], inflation: Inflation) -> None:
    types_info = [m for m in members if m.filename.replace("\\", "/").lower() == CONTENT_TYPES]
    defaults: dict[str, str] = {}
    overrides: dict[str, str] = {}
    for info in types_info:
        found_defaults, found_overrides = _content_types(archive, info, inflation)
        defaults.update(found_defaults)
        overrides.update(found_overrides)
    for info in members:  # by name first: the clearest finding wins
        part = info.filename.replace("\\", "/")
        if part.lower().startswith("xl/externallinks/"):
            raise _Found(f"its part '{part}' links it to another workbook")
        if part.lower() == "xl/connections.xml":
            raise _Found(f"its part '{part}' holds data connections, which a reader opens to refresh the workbook")
    for info in members:
        if info.is_dir() or info in types_info:
            continue
        part = info.filename.replace("\\", "/")
        chunks = inflation.chunks(archive, info)
        first = next(chunks, b"")
        declared = _is_xml(part, defaults, overrides)
        if declared or first.lstrip(b" \t\r\n").startswith(_XML_STARTS):
            scan = _PartScan(part)
            _feed(scan, _chained(first, chunks), declared_xml=declared)
        else:
            for _chunk in chunks:  # every part is inflated once, so every cap counts it
                pass


def _chained(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def _over_file_cap(what: str, limits: ZipLimits) -> OfficeRefusal:
    return OfficeRefusal(what, f"it is a zip over {cap_text('file_bytes', limits)}; {RAISE_IT}", checked=False)


def office_refusal(data: bytes, what: str, limits: ZipLimits | None = None) -> OfficeRefusal | None:
    """Why the file whose bytes are ``data`` (named ``what``) is refused, or None.

    None for anything that is not a zip holding ``[Content_Types].xml``.
    """
    limits = limits or ZipLimits.from_env()
    source = io.BytesIO(data)
    if not zipfile.is_zipfile(source):
        return None
    if len(data) > limits.file_bytes:
        return _over_file_cap(what, limits)
    inflation = Inflation(what, limits)
    try:
        with zipfile.ZipFile(source) as archive:
            names = archive.namelist()
            if not any(name.replace("\\", "/").lower() == CONTENT_TYPES for name in names):
                return None
            members = inflation.check_count(archive)
            _scan_package(archive, members, inflation)
    except _Found as found:
        return OfficeRefusal(what, str(found))
    except ArchiveRefused as exc:
        return OfficeRefusal(what, exc.reason, checked=False)
    except _Unchecked as exc:
        return OfficeRefusal(what, str(exc), checked=False)
    except ZIP_ERRORS as exc:
        return OfficeRefusal(what, f"it is a damaged zip ({exc})", checked=False)
    return None


def check_office_file(root: Path, rel: str | os.PathLike[str], what: str | None = None,
                      limits: ZipLimits | None = None) -> OfficeRefusal | None:
    """:func:`office_refusal` of the regular file ``root/rel``, opened without following a link.

    A zip over the per-file cap is refused unread (its parts cannot be checked within the caps).
    """
    limits = limits or ZipLimits.from_env()
    what = what or shown_name(PurePosixPath(rel).as_posix())
    fd = open_regular_beneath(root, rel, max_bytes=MAX_OPEN_BYTES)
    with open(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limits.file_bytes:
            return _over_file_cap(what, limits) if zipfile.is_zipfile(handle) else None
        data = handle.read(size)
    return office_refusal(data, what, limits)


def refuse_office_files(folder: Path, limits: ZipLimits | None = None, *, what_prefix: str = "",
                        shown: Callable[[str], str] | None = None,
                        unchecked: bool = True) -> list[tuple[str, OfficeRefusal]]:
    """Check every regular file below ``folder``; remove each refused one; return ``[(rel, refusal)]``.

    A refusal names the file as ``what_prefix + rel`` (or ``shown(rel)``). ``unchecked=False``
    keeps files that could not be checked (``materialize``: their views say why); the gate and
    the grading stage refuse them too.
    """
    limits = limits or ZipLimits.from_env()
    refused: list[tuple[str, OfficeRefusal]] = []
    for rel, info in list(walk_entries(folder)):
        if not stat.S_ISREG(info.st_mode):
            continue
        what = shown(rel.as_posix()) if shown is not None else what_prefix + rel.as_posix()
        try:
            refusal = check_office_file(folder, rel, shown_name(what), limits)
        except UnsafePath:
            continue  # gone or replaced since the walk: the callers' own copies never are
        if refusal is None or (not refusal.checked and not unchecked):
            continue
        parent = open_dir_beneath(folder, rel.parent if rel.parent != PurePosixPath(".") else "")
        try:
            remove_beneath(parent, rel.name)
        finally:
            os.close(parent)
        refused.append((rel.as_posix(), refusal))
    return refused


__all__ = ["FIX", "OfficeRefusal", "check_office_file", "external_formula_reason", "office_refusal",
           "refuse_office_files"]
