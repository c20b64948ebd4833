"""Build real decompression bombs on disk, cheaply: a zip member or pdf stream of N MiB of filler
between an XML (or PDF) head and tail, deflated once per filler size and reused.

    write_zip(path, [Member("ppt/slides/slide1.xml", SLIDE_HEAD, SLIDE_TAIL, 512)])
    write_zip(path, [Member("a.xml", b"<a>", b"</a>", 512, declared_size=100)])   # a lying header, true CRC of 100 bytes
    write_pdf(path, 512)                                                          # a 512 MiB flate stream

Each member is raw deflate (head, filler and tail deflated separately and joined at byte-aligned
block boundaries), with a true CRC unless the size is forged, so a reader that trusts nothing
still has to inflate it to find out.
"""

from __future__ import annotations

import functools
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20
FILLER_BYTE = b"A"

SLIDE_HEAD = (b'<p:sld xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
              b'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><p:cSld><p:spTree>'
              b"<p:sp><p:txBody><a:p><a:r><a:t>")
SLIDE_TAIL = b"</a:t></a:r></a:p></p:txBody></p:sp></p:spTree></p:cSld></p:sld>"


@dataclass(frozen=True)
class Member:
    """One zip entry: ``head`` + ``filler_mib`` MiB of filler + ``tail``; ``declared_size`` forges the header."""

    name: str
    head: bytes
    tail: bytes = b""
    filler_mib: int = 0
    declared_size: int | None = None
    stored: bytes | None = None  # a plain small member (no filler), kept as is


def _sync_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush(zlib.Z_SYNC_FLUSH)


@functools.lru_cache(maxsize=None)
def _filler(mib: int) -> tuple[bytes, int]:
    """(raw deflate blocks of ``mib`` MiB of filler, ending byte-aligned, its size in bytes)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = FILLER_BYTE * MIB
    out = bytearray()
    for _ in range(mib):
        out += packer.compress(block)
    out += packer.flush(zlib.Z_SYNC_FLUSH)
    return bytes(out), mib * MIB


@functools.lru_cache(maxsize=None)
def _filler_crc(start: int, mib: int) -> int:
    crc = start
    block = FILLER_BYTE * MIB
    for _ in range(mib):
        crc = zlib.crc32(block, crc)
    return crc


def _deflated(member: Member) -> tuple[bytes, int, int]:
    """(raw deflate data, CRC, true inflated size) of a member."""
    if member.stored is not None:
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
        return packer.compress(member.stored) + packer.flush(), zlib.crc32(member.stored), len(member.stored)
    filler, filler_size = _filler(member.filler_mib) if member.filler_mib else (b"", 0)
    final = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = _sync_deflate(member.head) + filler + final.compress(member.tail) + final.flush()
    crc = zlib.crc32(member.head)
    if member.filler_mib:
        crc = _filler_crc(crc, member.filler_mib)
    crc = zlib.crc32(member.tail, crc)
    return data, crc, len(member.head) + filler_size + len(member.tail)


def zip_bytes(members: list[Member]) -> bytes:
    """A zip archive (deflate, zip64 sizes where needed) holding ``members``."""
    out = bytearray()
    central = bytearray()
    for member in members:
        data, crc, size = _deflated(member)
        declared = size if member.declared_size is None else member.declared_size
        if member.declared_size is not None:  # forged: the CRC of the bytes the header claims, so a reader
            prefix = (member.head + FILLER_BYTE * member.declared_size)[:member.declared_size]  # that stops there is content
            crc = zlib.crc32(prefix)
        name = member.name.encode()
        zip64 = declared >= 0xFFFFFFFF or len(data) >= 0xFFFFFFFF
        extra = struct.pack("<HHQQ", 1, 16, declared, len(data)) if zip64 else b""
        small = (0xFFFFFFFF, 0xFFFFFFFF) if zip64 else (len(data), declared)
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45 if zip64 else 20, 0, 8, 0, 0x21, crc,
                           small[0], small[1], len(name), len(extra)) + name + extra + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45 if zip64 else 20, 45 if zip64 else 20, 0, 8, 0,
                               0x21, crc, small[0], small[1], len(name), len(extra), 0, 0, 0, 0, offset)
        central += name + extra
    start = len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), start, 0)
    return bytes(out)


def write_zip(path: Path, members: list[Member]) -> Path:
    path.write_bytes(zip_bytes(members))
    return path


def write_pdf(path: Path, filler_mib: int, *, text: str = "Hello") -> Path:
    """A one-page pdf whose content stream is a flate stream of ``filler_mib`` MiB of spaces
    (valid content: a huge run of whitespace, then one text show)."""
    content_head = b" " * 16
    content_tail = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    packer = zlib.compressobj(9)
    stream = bytearray(packer.compress(content_head))
    block = b" " * MIB
    for _ in range(filler_mib):
        stream += packer.compress(block)
    stream += packer.compress(content_tail) + packer.flush()
    path.write_bytes(one_page_pdf(bytes(stream), b" /Filter /FlateDecode"))
    return path


def one_page_pdf(stream: bytes, stream_keys: bytes = b"") -> bytes:
    """A one-page PDF (Helvetica) whose content is ``stream`` (``stream_keys``: more dictionary
    entries, e.g. a filter), offsets computed so pypdf reads it cleanly."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + stream_keys + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)
