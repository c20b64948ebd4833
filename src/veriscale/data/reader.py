"""Read one input a user names (a task, a candidate, a criteria file, an importer's file, a steps file).

    text = read_text("task.md", "task")                 # str; "-" reads stdin
    data = read_bytes("shot.png", "image")              # bytes, for binary inputs
    raw = read_bytes("runs.jsonl.gz", "candidate file", gunzip=True)
    obj = parse_json(text, "candidate file 'run.json'")  # json.loads with limits
    with open_regular(Path("steps.jsonl"), "steps file") as handle: ...   # a binary handle, for following

Every path is checked before it is opened: only a regular file is read. A FIFO, a device (such as
``/dev/zero``) or a socket is refused in one sentence, and the file is opened with ``O_NONBLOCK``
so a FIFO swapped in after the check cannot block the open. An input larger than
``max_input_bytes()`` (``VERISCALE_MAX_INPUT_MB``, default 128 MiB; also after gunzip) is refused,
as is text that is not UTF-8. :func:`parse_json` refuses documents nested deeper than
``MAX_JSON_DEPTH`` (checked by a linear scan, before the parser can recurse), numbers longer than
``MAX_NUMBER_CHARS`` characters, and lone surrogate escapes such as ``"\\ud800"`` (no UTF-8 text
can hold them); a syntax error stays a ``json.JSONDecodeError`` for the caller to word.
Every refusal is a :class:`BadInput` (a ``UserError``) naming the input and the fix.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import re
import stat
import sys
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from veriscale import settings
from veriscale.errors import UserError, setting

MAX_INPUT_ENV = "VERISCALE_MAX_INPUT_MB"
DEFAULT_MAX_INPUT_MB = 128
MAX_JSON_DEPTH = 100
MAX_NUMBER_CHARS = 1000
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')  # a whole string, or a bracket
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


class BadInput(UserError):
    """An input veriscale refuses to read; ``reason`` is the short why (e.g. for a skipped line)."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


def max_input_bytes() -> int:
    """The size cap of one input: the CLI's choice, else ``$VERISCALE_MAX_INPUT_MB`` MiB, else 128 MiB."""
    return max(1, round(settings.value("max_input_mb") * (1 << 20)))  # --max-input-mb, inputs.max_mb, $ENV


def _too_big(what: str, cap: int, size: int | None = None) -> BadInput:
    """``size`` when known (a file's), else "more than" the cap (a stream, an inflated file)."""
    mib = f"{cap / (1 << 20):.3g}"
    told = f"is {size:,} bytes" if size is not None else f"is more than {cap:,} bytes"
    return BadInput(f"{what} {told}, above the {mib} MiB input limit: shorten it, or raise "
                    f"{setting('max_input_mb')} / ${MAX_INPUT_ENV} (now {mib})", "too large")


def check_regular(path: Path, what: str, fix: str = "") -> os.stat_result:
    """The file's status, when ``path`` is a regular file; else a BadInput naming ``what`` (and ``fix``)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise BadInput(f"{what} '{path}' does not exist: check the path") from None
    except OSError as exc:
        raise BadInput(f"cannot read {what} '{path}' ({exc.strerror}): check the path and its permissions") from None
    except ValueError:  # a NUL byte in the name: no file can have it
        raise BadInput(f"{what} '{shown(path, 200)}' holds a NUL byte in its name: give the file's real path",
                       "a NUL byte in the name") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        fix = "pass a file inside it" if stat.S_ISDIR(st.st_mode) else fix or "save it to a regular file first"
        raise BadInput(f"{what} '{path}' is {kind}, not a regular file: {fix}", kind)
    return st


def open_regular(path: Path, what: str, fix: str = "") -> BinaryIO:
    """A binary handle on the regular file ``path`` (opened non-blocking, then checked again)."""
    check_regular(path, what, fix)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise BadInput(f"cannot read {what} '{path}' ({exc.strerror}): check its permissions") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between the check and the open
        os.close(fd)
        raise BadInput(f"{what} '{path}' is not a regular file: {fix or 'save it to a regular file first'}")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _read_capped(handle: BinaryIO, what: str, cap: int) -> bytes:
    data = handle.read(cap + 1)
    if len(data) > cap:
        raise _too_big(what, cap)
    return data


def _gunzip(raw: bytes, what: str, cap: int) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(raw, cap + 1)
    except zlib.error as exc:
        raise BadInput(f"{what} is not a valid gzip file ({exc}): re-compress it") from None
    if len(out) > cap:
        raise _too_big(what + " (uncompressed)", cap)
    if not inflater.eof:
        raise BadInput(f"{what} is a truncated gzip file: re-compress it")
    if inflater.unused_data.strip(b"\0"):  # a further gzip member: let gzip read the whole stream
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as handle:
                out = _read_capped(handle, what + " (uncompressed)", cap)
        except (OSError, EOFError) as exc:
            raise BadInput(f"{what} is not a valid gzip file ({exc}): re-compress it") from None
    return out


def read_bytes(source: str | os.PathLike[str], what: str, *, gunzip: bool = False,
               max_bytes: int | None = None, fix: str = "") -> bytes:
    """The bytes of ``source`` (``"-"``: stdin), a regular file of at most the input limit.

    ``gunzip``: inflate it when its name ends in ``.gz`` (the limit applies to what comes out).
    ``fix``: what a refusal of a FIFO or device tells the user to do instead.
    """
    cap = max_input_bytes() if max_bytes is None else max_bytes
    if str(source) == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # a text stdin (a test harness): its text as UTF-8
            data = sys.stdin.read(cap + 1).encode("utf-8", "surrogatepass")
            if len(data) > cap:
                raise _too_big(f"{what} from stdin", cap)
            return data
        return _read_capped(stream, f"{what} from stdin", cap)
    path = Path(source)
    label = f"{what} '{path}'"
    st = check_regular(path, what, fix)
    if st.st_size > cap:
        raise _too_big(label, cap, st.st_size)
    with open_regular(path, what, fix) as handle:
        try:
            raw = _read_capped(handle, label, cap)
        except OSError as exc:
            raise BadInput(f"cannot read {label} ({exc.strerror}): check the file") from None
    if gunzip and path.suffix.lower() == ".gz":
        raw = _gunzip(raw, label, cap)
    return raw


_IMAGE_FIX = ("here veriscale reads text: give the run's text or transcript; an image is judged as a candidate by a "
              "file name ending .png, .jpg, .webp or .gif (or in a folder of frames) with a vision model (docs/VISION.md)")
_OFFICE_FIX = ("veriscale reads text candidates; give the run's text or transcript, or put the file in a rollout "
               "folder for `veriscale harness materialize`, which reads .xlsx, .docx, .pptx and .pdf files")
_GZIP_FIX = ("unpack it first (gunzip); only candidate files and pools named *.gz are read compressed, "
             "by the run importers")
_PROGRAM_FIX = "veriscale reads text candidates; give the run's text, transcript or log instead"
_ARCHIVE_FIX = "unpack it and give the text files inside it"
#: (leading bytes, what the file is, what to do instead), checked in order.
_MAGIC: tuple[tuple[bytes, str, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image", _IMAGE_FIX),
    (b"\xff\xd8\xff", "a JPEG image", _IMAGE_FIX),
    (b"GIF87a", "a GIF image", _IMAGE_FIX),
    (b"GIF89a", "a GIF image", _IMAGE_FIX),
    (b"II*\x00", "a TIFF image", _IMAGE_FIX),
    (b"MM\x00*", "a TIFF image", _IMAGE_FIX),
    (b"%PDF-", "a PDF document", _OFFICE_FIX),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old-style Office document (.xls, .doc or .ppt)",
     "save it as .xlsx/.docx/.pptx for `veriscale harness materialize`, or as text"),
    (b"\x1f\x8b", "gzip-compressed data", _GZIP_FIX),
    (b"BZh", "bzip2-compressed data", "unpack it first (bunzip2) and give the text"),
    (b"\xfd7zXZ\x00", "xz-compressed data", "unpack it first (unxz) and give the text"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data", "unpack it first (unzstd) and give the text"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive", _ARCHIVE_FIX),
    (b"Rar!\x1a\x07", "a RAR archive", _ARCHIVE_FIX),
    (b"\x7fELF", "an ELF program (a compiled binary)", _PROGRAM_FIX),
    (b"MZ", "a Windows program (a compiled binary)", _PROGRAM_FIX),
    (b"\xcf\xfa\xed\xfe", "a macOS program (a compiled binary)", _PROGRAM_FIX),
    (b"SQLite format 3\x00", "an SQLite database",
     "export the runs from it as JSON, JSONL or text (e.g. sqlite3 -json) and give that"),
    (b"\xff\xfe", "UTF-16 text", "save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)"),
    (b"\xfe\xff", "UTF-16 text", "save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)"),
)


def _zip_kind(raw: bytes) -> tuple[str, str]:
    """What a ZIP holds: an Office file (by its parts) or a plain archive."""
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            names = zf.namelist()[:10_000]
    except (zipfile.BadZipFile, OSError, ValueError, RuntimeError, EOFError):
        names = []
    for prefix, kind in (("xl/", "an Excel workbook (.xlsx)"), ("word/", "a Word document (.docx)"),
                         ("ppt/", "a PowerPoint deck (.pptx)")):
        if any(name.startswith(prefix) for name in names):
            return kind, _OFFICE_FIX
    return "a ZIP archive", _ARCHIVE_FIX


def binary_kind(raw: bytes) -> tuple[str, str] | None:
    """``(what the bytes are, what to do instead)`` when their magic bytes name a binary format, else None::

        binary_kind(b"\x89PNG\r\n\x1a\n...")   # ("a PNG image", "veriscale reads text candidates; ...")
    """
    head = bytes(raw[:16])
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _zip_kind(raw)
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "a WebP image", _IMAGE_FIX
    for magic, kind, fix in _MAGIC:
        if head.startswith(magic):
            return kind, fix
    return None


def not_text(raw: bytes, what: str, start: int) -> BadInput:
    """The refusal of ``raw`` (named ``what``) as text: what the file is when its magic bytes say, else
    where the first byte that is not UTF-8 sits (``start``, counted from 0)."""
    known = binary_kind(raw)
    if known is not None:
        kind, fix = known
        other = "UTF-8 text" if kind.endswith(" text") else "text"  # UTF-16 is text, only not UTF-8
        return BadInput(f"{what} is {kind}, not {other}: {fix}", f"{kind}, not {other}")
    return BadInput(f"{what} is not UTF-8 text (an invalid byte at position {start:,}): "
                    "convert it to UTF-8 text, Markdown or JSON", "not UTF-8 text")


def decode_text(raw: bytes, what: str) -> str:
    """``raw`` as UTF-8 text (a leading byte-order mark dropped); else a BadInput naming ``what``
    and, when its magic bytes say, what the file is (``'shot.png' is a PNG image, not text: ...``)."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise not_text(raw, what, exc.start) from None


def read_text(source: str | os.PathLike[str], what: str, *, gunzip: bool = False,
              max_bytes: int | None = None, fix: str = "") -> str:
    """The UTF-8 text of ``source`` (``"-"``: stdin); see :func:`read_bytes` for what is refused."""
    raw = read_bytes(source, what, gunzip=gunzip, max_bytes=max_bytes, fix=fix)
    return decode_text(raw, f"{what} from stdin" if str(source) == "-" else f"{what} '{source}'")


def require_utf8(text: str, what: str) -> str:
    """``text`` when UTF-8 can hold it; a lone surrogate (from a Python caller, a JSON escape) is a BadInput."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadInput(f"the {what} holds a lone UTF-16 surrogate (U+{ord(text[exc.start]):04X} at character "
                       f"{exc.start:,}), which no UTF-8 text can hold: remove it or fix the writer",
                       "a lone surrogate") from None
    return text


def json_depth_over(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``text`` opens more than ``limit`` arrays/objects at once (strings skipped; linear)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    depth = 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


class JsonLimit(ValueError):
    """Valid JSON that veriscale refuses: the message completes a sentence about the input
    ("nests arrays or objects more than 100 deep"); ``reason`` is the short why."""

    def __init__(self, phrase: str, reason: str) -> None:
        super().__init__(phrase)
        self.reason = reason


def _number(kind: type, finite: bool = False) -> Any:
    def parse(literal: str) -> Any:
        if len(literal) > MAX_NUMBER_CHARS:
            raise JsonLimit(f"holds a number {len(literal):,} characters long (at most {MAX_NUMBER_CHARS:,})",
                            "a number too long")
        value = kind(literal)
        if finite and not math.isfinite(value):
            raise JsonLimit(f"holds the number {literal}, past the range of a 64-bit float, which no JSON "
                            "writer can write back", "a number out of range")
        return value
    return parse


def _no_constant(literal: str) -> Any:
    raise JsonLimit(f"holds {literal}, which is not JSON (RFC 8259 has no NaN or Infinity)", "a NaN or Infinity")


def _lone_surrogate(data: Any) -> bool:
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def decode_json(text: str | bytes, *, finite: bool = False) -> Any:
    """``json.loads(text)`` under the limits above: ``json.JSONDecodeError`` for text that is not
    JSON, :class:`JsonLimit` for JSON past a limit (checked before the parser can recurse).

    ``finite=True`` is for bodies a server answers from (they may be echoed back or forwarded):
    ``NaN``, ``Infinity`` and a float past range (``1E400``) are then a :class:`JsonLimit` too, so
    nothing read can fail to be written again. Files keep Python's reading, which accepts them."""
    if json_depth_over(text):
        raise JsonLimit(f"nests arrays or objects more than {MAX_JSON_DEPTH} deep",
                        f"nested more than {MAX_JSON_DEPTH} deep")
    constants = {"parse_constant": _no_constant} if finite else {}
    data = json.loads(text, parse_int=_number(int), parse_float=_number(float, finite), **constants)
    probe = text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
    if _SURROGATE_ESCAPE.search(probe) and _lone_surrogate(data):
        raise JsonLimit("holds a lone surrogate escape (such as \\ud800), which no UTF-8 text can hold",
                        "a lone surrogate escape")
    return data


def parse_json(text: str | bytes, what: str) -> Any:
    """:func:`decode_json`, with a breach of a limit raised as :class:`BadInput` naming ``what``;
    a syntax error stays ``json.JSONDecodeError`` (the caller words it)."""
    try:
        return decode_json(text)
    except JsonLimit as exc:
        raise BadInput(f"{what} {exc}: fix the writer or drop that value", exc.reason) from None


def load_json(text: str | bytes, what: str) -> Any:
    """``text`` as JSON, or a ``UserError`` whose one sentence names ``what`` (e.g. "'a.json' line 3")
    whatever is wrong: syntax or a limit."""
    try:
        return parse_json(text, what)
    except json.JSONDecodeError as exc:
        raise UserError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
                        "fix it or give its real format") from None


def try_json(text: str | bytes) -> Any | None:
    """``text`` as JSON when it is JSON within the limits, else None (for text that may hold JSON)."""
    try:
        return decode_json(text)
    except ValueError:  # JSONDecodeError and JsonLimit
        return None


def shown(text: Any, limit: int = 60) -> str:
    """Untrusted text for a one-line message: control and surrogate characters escaped, cut at ``limit``."""
    text = str(text)
    cut = text[:limit]
    escaped = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in cut)
    return escaped + ("…" if len(text) > limit else "")


__all__ = ["BadInput", "JsonLimit", "MAX_INPUT_ENV", "MAX_JSON_DEPTH", "MAX_NUMBER_CHARS", "binary_kind",
           "check_regular", "decode_json", "decode_text", "not_text", "json_depth_over", "load_json", "max_input_bytes", "open_regular", "parse_json",
           "read_bytes", "read_text", "require_utf8", "shown", "try_json"]
