"""Folders between a Ray driver and its workers as in-memory tars, trusting nothing that comes back.

``harness run --executor ray`` (:mod:`veriscale.many.ray_harness`) ships a task folder to a worker
and the worker's whole run folder back::

    data, left_out = pack_folder(Path("tasks/t1"), max_bytes=1 << 30)     # plain files and folders only
    report = unpack_folder(data, Path("tasks/t1.runs/r1"), max_bytes=1 << 30, what="the run folder")
    report.files, report.left_out                                         # dest now holds exactly that

Packing walks the folder without following anything (:func:`veriscale.harness.safe_fs.walk_entries`):
regular files and folders go in (modes 0644/0755, owner and times dropped); links, FIFOs, devices and
sockets are left out and listed. Unpacking never calls ``extractall``: it reads the headers first
(at most ``max_entries``), refuses the whole tar in one sentence when its files add up to more than
``max_bytes`` or it is malformed, and writes each regular file and folder itself below a fresh staging
folder beside ``dest`` (:mod:`veriscale.harness.safe_write`: no link on the way is followed, none is
created). A name that leaves the folder (absolute, ``..``), carries a control or bidi character or lies
deeper than ``max_depth``, and any entry that is not a regular file or folder (a symbolic or hard
link, a FIFO, a device) is left out and listed. Only then is the staging folder swapped in for
``dest``; a refused tar leaves ``dest`` as it was.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from veriscale.errors import UserError
from veriscale.harness.safe_fs import UnsafePath, _kind, open_regular_beneath, walk_entries
from veriscale.harness.safe_names import member_problem, shown_name
from veriscale.harness.safe_write import make_dirs_beneath, make_plain_dir, remove_tree, write_stream_beneath

#: a run folder (or task folder) larger than this is refused whole
DEFAULT_MAX_BYTES = 4 << 30
#: headers and PAX records on top of the files' bytes
_SLACK_BYTES = 16 << 20


class TransferRefused(UserError):
    """A packed folder was refused whole (too large, too many entries, malformed)."""


@dataclass
class UnpackReport:
    files: int = 0
    bytes: int = 0
    left_out: list[str] = field(default_factory=list)


def pack_folder(root: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "the folder") -> tuple[bytes, list[str]]:
    """``root``'s regular files and folders as an uncompressed tar; and what was left out, one line each."""
    buffer = io.BytesIO()
    left_out: list[str] = []
    total = 0
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, info in walk_entries(Path(root)):
            name = rel.as_posix()
            if stat.S_ISDIR(info.st_mode):
                member = tarfile.TarInfo(name)
                member.type, member.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(member)
                continue
            if not stat.S_ISREG(info.st_mode):
                left_out.append(f"{shown_name(name)} ({_kind(info.st_mode).removeprefix('a ')})")
                continue
            try:
                fd = open_regular_beneath(Path(root), rel, max_bytes=max(0, max_bytes - total))
            except UnsafePath as exc:
                if info.st_size + total > max_bytes:
                    raise TransferRefused(f"{what} '{root}' holds more than {max_bytes} bytes: it cannot travel "
                                          "between the Ray driver and a worker; keep less in it") from None
                left_out.append(f"{shown_name(name)} ({exc})")
                continue
            with os.fdopen(fd, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                member = tarfile.TarInfo(name)
                member.size, member.mode = size, 0o755 if info.st_mode & 0o100 else 0o644
                tar.addfile(member, handle)
                total += size
    return buffer.getvalue(), left_out


def _kind_problem(member: tarfile.TarInfo) -> str | None:
    if member.isdir() or member.isreg():
        return None
    if member.issym() or member.islnk():
        return "a link: links are not unpacked"
    return "not a regular file or folder"


def unpack_folder(data: bytes, dest: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, max_entries: int = 100_000,
                  max_depth: int = 80, what: str = "the folder",
                  before_swap: Callable[[Path], None] | None = None) -> UnpackReport:
    """Make ``dest`` hold exactly the regular files and folders of the tar ``data`` (module docstring).

    ``before_swap(staging)`` runs on the unpacked copy before it replaces ``dest``.
    """
    dest = Path(os.path.abspath(dest))
    if len(data) > max_bytes + _SLACK_BYTES:
        raise TransferRefused(f"{what} is {len(data)} bytes packed, over the {max_bytes}-byte cap: nothing of it "
                              "was kept")
    make_plain_dir(dest.parent)
    staging = dest.parent / f".{dest.name}.unpack-{uuid.uuid4().hex[:8]}"
    report = UnpackReport()
    try:
        make_plain_dir(staging)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            members = []
            for member in tar:  # headers only: counted and sized before anything is written
                members.append(member)
                if len(members) > max_entries:
                    raise TransferRefused(f"{what} holds more than {max_entries} files and folders: nothing of it "
                                          "was kept")
            if sum(m.size for m in members if m.isreg()) > max_bytes:
                raise TransferRefused(f"{what} holds more than {max_bytes} bytes of files: nothing of it was kept")
            for member in members:
                why = member_problem(member.name, max_depth) or _kind_problem(member)
                if why is None:
                    why = _write(tar, member, staging, report)
                if why is not None:
                    report.left_out.append(f"{shown_name(member.name)[:200]!r} ({why})")
        if before_swap is not None:
            before_swap(staging)
    except TransferRefused:
        remove_tree(staging)
        raise
    except (tarfile.TarError, OSError, ValueError, EOFError) as exc:
        remove_tree(staging)
        raise TransferRefused(f"{what} is not a sound tar ({exc}): nothing of it was kept") from None
    except BaseException:
        remove_tree(staging)
        raise
    old = dest.parent / f".{dest.name}.old-{uuid.uuid4().hex[:8]}"
    if os.path.lexists(dest):
        os.rename(dest, old)
    os.rename(staging, dest)
    remove_tree(old)
    return report


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, staging: Path, report: UnpackReport) -> str | None:
    rel = PurePosixPath(member.name)
    try:
        if member.isdir():
            make_dirs_beneath(staging, rel)
            return None
        source = tar.extractfile(member)
        size = write_stream_beneath(staging, rel, source if source is not None else io.BytesIO(),
                                    0o755 if member.mode & 0o100 else 0o644, max_bytes=member.size)
    except UnsafePath as exc:
        return f"not written: {exc}"
    except OSError as exc:
        return f"this host cannot take the name: {exc.strerror or exc}"
    report.files += 1
    report.bytes += size
    return None
