"""Caps on what the host inflates from a file it did not write: office files (zips), pdf streams.

Every byte is counted as it is inflated; the sizes a zip's headers declare are never trusted::

    limits = ZipLimits.from_env()                       # defaults, or the VERISCALE_ZIP_* settings
    data = checked_zip(Path("deck.pptx"), limits)       # the file's bytes, every member inflated once
    book = openpyxl.load_workbook(io.BytesIO(data))     # ... so the library gets what was checked
    data = checked_pdf(Path("paper.pdf"), limits)       # every flate stream inflated and counted
    for chunk in Inflation("run.zip", limits).chunks(archive, info): ...

A file over a cap raises :class:`ArchiveRefused`, a ``UserError`` whose one sentence names the
file, the cap and the setting that raises it. The caps are settings (a flag, an environment
variable and a config-file key each; the table is in :mod:`veriscale.harness.host_caps`):
``zip_member_mb`` (``VERISCALE_ZIP_MEMBER_MB``, 32: bytes inflated from one zip member or pdf
stream), ``zip_file_mb`` (``VERISCALE_ZIP_FILE_MB``, 128: from one file, all members together),
``zip_members`` (``VERISCALE_ZIP_MEMBERS``, 10000: entries of one zip), ``view_timeout_s``
(``VERISCALE_VIEW_TIMEOUT_S``, 60: seconds one text view may take) and ``view_memory_mb``
(``VERISCALE_VIEW_MEMORY_MB``, 2048: address space a view may add; both in view_worker).
"""

from __future__ import annotations

import io
import mmap
import os
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import BinaryIO, Iterator

from veriscale.errors import UserError
from veriscale.harness import host_caps

CHUNK = 1 << 16
RAISE_IT = "raise that setting if the file is trusted"
_MIB = 1 << 20

#: ZipLimits field -> (its host cap, multiplier from the cap's unit to the field's)
_CAP_OF = {
    "member_bytes": ("zip_member_mb", _MIB),
    "file_bytes": ("zip_file_mb", _MIB),
    "members": ("zip_members", 1),
    "view_seconds": ("view_timeout_s", 1),
    "view_memory_bytes": ("view_memory_mb", _MIB),
}
_SETTING_OF = {field: host_caps.CAPS[cap].env for field, (cap, _unit) in _CAP_OF.items()}
# Errors a damaged, encrypted or oddly compressed zip raises while it is read.
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError,
              ValueError, KeyError)


class ArchiveRefused(UserError):
    """A file the host will not inflate: ``what`` names it, ``reason`` says which cap and how to raise it."""

    def __init__(self, what: str, reason: str, cap: str | None = None) -> None:
        super().__init__(f"{what} was not opened: {reason}")
        self.what = what
        self.reason = reason
        self.cap = cap  # the ZipLimits field that refused it, if a cap did


@dataclass(frozen=True)
class ZipLimits:
    """The caps; ``ZipLimits()`` is the defaults, ``ZipLimits.from_env()`` reads the settings."""

    member_bytes: int = 32 * _MIB  # python-docx holds a 32 MiB part in about 250 MiB of lxml tree
    file_bytes: int = 128 * _MIB
    members: int = 10_000
    view_seconds: float = 60.0
    view_memory_bytes: int = 2048 * _MIB

    @classmethod
    def from_env(cls) -> "ZipLimits":
        """The caps as set: the CLI's choice (flag or config file), else each ``VERISCALE_ZIP_*`` /
        ``VERISCALE_VIEW_*`` environment variable, else the defaults (:func:`veriscale.harness.host_caps.current`)."""
        caps = host_caps.current()
        values: dict[str, float | int] = {}
        for field, (cap, unit) in _CAP_OF.items():
            number = getattr(caps, cap)
            values[field] = number * unit if field == "view_seconds" else max(1, round(number * unit))
        return cls(**values)  # type: ignore[arg-type]

    def as_dict(self) -> dict[str, float]:
        """The caps as plain numbers (what a worker process is sent)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def cap_text(field: str, limits: ZipLimits) -> str:
    """``'the 32 MiB per-member cap (VERISCALE_ZIP_MEMBER_MB)'`` for a field of ``limits``."""
    value = getattr(limits, field)
    shown = {
        "member_bytes": f"{value / _MIB:g} MiB per-member",
        "file_bytes": f"{value / _MIB:g} MiB per-file",
        "members": f"{value}-entry",
        "view_seconds": f"{value:g}-second",
        "view_memory_bytes": f"{value / _MIB:g} MiB view-memory",
    }[field]
    return f"the {shown} cap ({_SETTING_OF[field]})"


class Inflation:
    """Counts the bytes inflated from one file (``what``) against the caps of ``limits``."""

    def __init__(self, what: str, limits: ZipLimits, *, member_cap: int | None = None) -> None:
        self.what = what
        self.limits = limits
        self.member_cap = limits.member_bytes if member_cap is None else member_cap
        self.total = 0

    def count(self, added: int, member_so_far: int, part: str) -> None:
        """Add ``added`` inflated bytes of ``part`` (e.g. "part 'a.xml'"); raise ``ArchiveRefused`` past a cap."""
        self.total += added
        if member_so_far > self.member_cap:
            raise ArchiveRefused(self.what, f"its {part} inflates past "
                                 f"{cap_text('member_bytes', self.limits)}; {RAISE_IT}", "member_bytes")
        if self.total > self.limits.file_bytes:
            raise ArchiveRefused(self.what, f"its parts inflate past {cap_text('file_bytes', self.limits)}; {RAISE_IT}",
                                 "file_bytes")

    def check_count(self, archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
        """The archive's entries, or ``ArchiveRefused`` when there are more than the cap allows."""
        members = archive.infolist()
        if len(members) > self.limits.members:
            raise ArchiveRefused(self.what, f"it holds {len(members)} entries, over "
                                 f"{cap_text('members', self.limits)}; {RAISE_IT}", "members")
        return members

    def chunks(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """The inflated bytes of one member, counted as they come.

        The member's compressed bytes are inflated here, from the archive itself, to their real
        end: ``zipfile`` would inflate a whole compressed member in one call and only then cut it
        to the declared size, so a header that lies is a bomb for any reader that trusts it. A
        member that does not inflate to exactly its declared size and CRC is refused.
        """
        name = info.filename
        if info.flag_bits & 0x1:
            raise ArchiveRefused(self.what, f"its part {name!r} is encrypted; give the file unencrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ArchiveRefused(self.what, f"its part {name!r} uses compression method {info.compress_type}, which "
                                 "the host does not inflate; repack it with deflate")
        source = archive.fp
        if source is None:
            raise zipfile.BadZipFile("the archive is closed")
        source.seek(info.header_offset)
        header = source.read(30)
        if len(header) != 30 or header[:4] != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"bad local header for {name!r}")
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        source.seek(info.header_offset + 30 + name_length + extra_length)
        inflater = zlib.decompressobj(-zlib.MAX_WBITS) if info.compress_type == zipfile.ZIP_DEFLATED else None
        left = info.compress_size
        seen = crc = 0
        while True:
            tail = inflater.unconsumed_tail if inflater is not None else b""
            if not tail:
                if left <= 0 or (inflater is not None and inflater.eof):
                    break
                tail = source.read(min(CHUNK, left))
                if not tail:
                    raise zipfile.BadZipFile(f"the data of {name!r} is cut short")
                left -= len(tail)
            chunk = inflater.decompress(tail, CHUNK) if inflater is not None else tail
            if chunk:
                seen += len(chunk)
                self.count(len(chunk), seen, f"part {name!r}")
                crc = zlib.crc32(chunk, crc)
                yield chunk
        if inflater is not None and not inflater.eof:
            raise zipfile.BadZipFile(f"the compressed data of {name!r} is cut short")
        if seen != info.file_size:
            raise ArchiveRefused(self.what, f"its part {name!r} inflates to {seen:,} bytes while its header declares "
                                 f"{info.file_size:,}; replace the file with one whose headers are true")
        if crc != info.CRC:
            raise zipfile.BadZipFile(f"Bad CRC-32 for file {name!r}")


def check_zip(source: BinaryIO, what: str, limits: ZipLimits) -> None:
    """Inflate every member of the zip ``source`` once, discarding the bytes; raise past a cap.

    A damaged archive (a CRC that does not match, as when a header lies about a size) raises
    what ``zipfile`` raises (one of ``ZIP_ERRORS``).
    """
    with zipfile.ZipFile(source) as archive:
        inflation = Inflation(what, limits)
        for info in inflation.check_count(archive):
            if not info.is_dir():
                for _chunk in inflation.chunks(archive, info):
                    pass


def checked_zip(path: Path, limits: ZipLimits, what: str | None = None) -> bytes:
    """The bytes of the zip at ``path`` after :func:`check_zip` passed on exactly those bytes.

    Hand the library ``io.BytesIO(data)``: it reads what was counted, even if the file changes.
    """
    what = what or f"'{path.name}'"
    data = _read_capped(path, what, limits)
    check_zip(io.BytesIO(data), what, limits)
    return data


def read_member(archive: zipfile.ZipFile, name: str, inflation: Inflation) -> bytes:
    """One member's bytes, counted against ``inflation``'s caps."""
    return b"".join(inflation.chunks(archive, archive.getinfo(name)))


# A stream's data starts after the keyword and its end of line; "endstream" is not a start.
_STREAM_START = re.compile(rb"(?<!end)stream(?:\r\n|\n|\r)?")


def checked_pdf(path: Path, limits: ZipLimits, what: str | None = None) -> bytes:
    """The bytes of the pdf at ``path`` after :func:`check_pdf_streams` passed on exactly those bytes."""
    what = what or f"'{path.name}'"
    data = _read_capped(path, what, limits)
    check_pdf_streams(data, what, limits)
    return data


def check_pdf_streams(data: bytes | mmap.mmap, what: str, limits: ZipLimits) -> None:
    """Inflate every flate (zlib or gzip) stream of the pdf ``data``, counting the bytes.

    Each stream is inflated from its start until zlib says it ended, so neither ``/Length`` nor a
    planted ``endstream`` can hide bytes. Image streams count against the per-stream cap only
    (text extraction does not decode them, and a scan holds many large ones).
    """
    inflation = Inflation(what, limits)
    for match in _STREAM_START.finditer(data):  # type: ignore[call-overload]
        head = data[max(0, match.start() - 2048):match.start()].rsplit(b"obj", 1)[-1]
        is_image = re.search(rb"/Subtype\s*/Image", head) is not None
        size = _inflated_size(data, match.end(), inflation.member_cap)
        if size:
            inflation.count(0 if is_image else size, size, f"stream at byte {match.start()}")


def _inflated_size(data: bytes | mmap.mmap, start: int, cap: int) -> int:
    """Bytes the flate data at ``start`` inflates to, stopping one past ``cap``; 0 when not flate."""
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)
    size = 0
    position = start
    try:
        while (position < len(data) or inflater.unconsumed_tail) and not inflater.eof and size <= cap:
            piece = inflater.unconsumed_tail or data[position:position + CHUNK]
            if not inflater.unconsumed_tail:
                position += len(piece)
            size += len(inflater.decompress(piece, CHUNK))
    except zlib.error:
        pass  # not flate, or damaged: what inflated so far still counts
    return size


def _read_capped(path: Path, what: str, limits: ZipLimits) -> bytes:
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limits.file_bytes:
            raise ArchiveRefused(what, f"it is over {cap_text('file_bytes', limits)} before inflating; {RAISE_IT}")
        return handle.read(size)  # read(n) reserves n bytes up front: ask for the size, not the cap
