"""Hand a session's output folder back to the host: read the tar stream, check it, swap it in.

Inside the jail the output folder is a size-capped tmpfs, seeded from the host's copy and
streamed back as a tar when the command ends (``jail_inside.py``). The host never trusts that
stream: it reads at most ``cap_bytes``, keeps regular files and folders whose names stay inside
the folder and carry no control characters, writes each file itself (mode 0644, folders 0755,
owned by the host user: no set-ID bit, no link, no FIFO or device survives), and only then
swaps the new folder in. A stream that is missing, malformed, cut before its end marker, over
the byte cap, over :data:`MAX_ENTRIES` files and folders, or not extracted by the session's
deadline changes nothing. Entries the host cannot take are dropped one by one and listed in
``left_out`` (names with control or bidi characters, folders deeper than :data:`MAX_DEPTH`, hard
links past the first name, symbolic links, FIFOs, names this file system cannot hold)::

    reader = HarvestReader(read_fd, cap_bytes=limits.output_bytes)
    ...                                    # the jail runs
    report = reader.apply(Path("runs/x/sessions/resolve"), deadline=time.monotonic() + 5)
    report.ok, report.files, report.left_out, report.error
"""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from veriscale.harness.host_caps import CAPS
from veriscale.harness.host_caps import current as current_caps
from veriscale.harness.safe_fs import UnsafePath
from veriscale.harness.safe_names import member_problem, shown_name
from veriscale.harness.safe_write import make_dirs_beneath, make_plain_dir, remove_tree, write_stream_beneath

#: tar headers cost 512 bytes a member (+ PAX records): this much on top of the output cap.
STREAM_SLACK_BYTES = 16 << 20
#: The most files and folders a hand-back may carry by default; a folder with more is not kept at all
#: (the ``handback_max_files`` setting, ``$VERISCALE_HANDBACK_MAX_FILES``: veriscale.harness.host_caps).
MAX_ENTRIES = CAPS["handback_max_files"].default
#: The deepest folder a hand-back carries by default; what lies below it is left out (and reported)
#: (the ``handback_max_depth`` setting, ``$VERISCALE_HANDBACK_MAX_DEPTH``).
MAX_DEPTH = CAPS["handback_max_depth"].default
_END_MARKER = b"\0" * (2 * tarfile.BLOCKSIZE)
_SHOWN_CHARS = 160


class _Refused(Exception):
    """The whole hand-back is refused; the message is the reason."""


@dataclass
class HarvestReport:
    """What came back from the jail."""

    ok: bool = False
    files: int = 0
    bytes: int = 0
    left_out: list[str] = field(default_factory=list)
    error: str | None = None


def _bad_name(name: str, max_depth: int) -> str | None:
    problem = member_problem(name, max_depth)
    if problem is not None and problem.startswith("deeper than"):
        return f"{problem}: it and what it holds were not handed back"
    return problem


def _kind_problem(member: tarfile.TarInfo) -> str | None:
    if member.isdir() or member.isreg():
        return None
    if member.islnk():
        return (f"a hard link to {_shown(member.linkname)}: only the first name of a file is kept; "
                "write a copy under this name")
    if member.issym():
        return "a symbolic link: links are not handed back"
    return "not a regular file or folder"


def _shown(name: str) -> str:
    text = shown_name(name)
    return repr(text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…")


class HarvestReader:
    """Drains the harvest pipe in a thread into a spool file, stopping at the cap."""

    def __init__(self, read_fd: int, cap_bytes: int, *, max_entries: int | None = None,
                 max_depth: int | None = None) -> None:
        """``max_entries`` / ``max_depth`` None: the ``handback_max_files`` / ``handback_max_depth`` settings."""
        caps = current_caps() if max_entries is None or max_depth is None else None
        self.cap_bytes = cap_bytes
        self.max_entries = caps.handback_max_files if max_entries is None else max_entries
        self.max_depth = caps.handback_max_depth if max_depth is None else max_depth
        self.limit = cap_bytes + STREAM_SLACK_BYTES
        self.received = 0
        self.over_cap = False
        self._spool = tempfile.SpooledTemporaryFile(max_size=8 << 20)
        self._pipe = os.fdopen(read_fd, "rb", buffering=0)
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while chunk := self._pipe.read(1 << 16):
                self.received += len(chunk)
                if self.received > self.limit:
                    self.over_cap = True
                    break
                self._spool.write(chunk)
        except OSError:
            pass
        finally:
            self._pipe.close()  # the writer sees EPIPE past the cap

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def discard(self) -> None:
        """Drop the stream unapplied (a stopped run): the host copy stays as it was."""
        self.join(5.0)
        self._spool.close()

    def apply(self, dest: Path, deadline: float | None = None) -> HarvestReport:
        """Check the stream and, when it is sound, make ``dest`` hold exactly what it carries.

        ``deadline`` (a ``time.monotonic()`` value): an extraction still running then is
        abandoned and the host copy stays as it was.
        """
        self.join(5.0)  # the command has ended: what is left in the pipe drains at once
        report = HarvestReport()
        if self._thread.is_alive():
            report.error = "the session's output stream did not end"
            return report
        if self.over_cap:
            report.error = f"the session's output folder streamed more than {self.limit} bytes"
            return report
        if self.received == 0:
            report.error = "the session did not hand its output folder back (its first process was killed)"
            return report
        self._spool.seek(0)
        staging = dest.parent / f".{dest.name}.harvest-{uuid.uuid4().hex[:8]}"
        try:
            make_plain_dir(staging)
            self._extract(staging, report, deadline)
        except (_Refused, tarfile.TarError, OSError, ValueError, EOFError) as exc:
            remove_tree(staging)
            reason = str(exc) if isinstance(exc, _Refused) else f"the session's output stream is malformed ({exc})"
            report.error, report.files, report.bytes, report.left_out = reason, 0, 0, []
            return report
        finally:
            self._spool.close()
        old = dest.parent / f".{dest.name}.old-{uuid.uuid4().hex[:8]}"
        if dest.exists() or dest.is_symlink():
            os.rename(dest, old)
        os.rename(staging, dest)
        remove_tree(old)
        report.ok = True
        return report

    def _extract(self, staging: Path, report: HarvestReport, deadline: float | None) -> None:
        with tarfile.open(fileobj=self._spool, mode="r:") as tar:
            members = []
            for member in tar:  # headers only: count before anything is written
                members.append(member)
                if len(members) > self.max_entries:
                    raise _Refused(f"the session's output folder holds more than {self.max_entries} files and "
                                   "folders: nothing of it was kept; keep fewer files there (the cap is "
                                   f"${CAPS['handback_max_files'].env})")
            self._spool.seek(tar.offset)
            if self._spool.read(len(_END_MARKER)) != _END_MARKER:
                raise _Refused("the session's output stream was cut before its end: nothing of it was kept")
            for entries, member in enumerate(members, start=1):
                if deadline is not None and entries % 256 == 0 and time.monotonic() > deadline:
                    raise _Refused("handing the output folder back ran past the session's deadline: "
                                   "nothing of it was kept")
                why = _bad_name(member.name, self.max_depth) or _kind_problem(member)
                if why is None and report.bytes + member.size > self.cap_bytes:
                    why = f"over the {self.cap_bytes}-byte output cap"
                if why is None:
                    why = self._write(tar, member, staging, report)
                if why is not None:
                    report.left_out.append(f"{_shown(member.name)} ({why})")

    @staticmethod
    def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, staging: Path, report: HarvestReport) -> str | None:
        """Write one member below ``staging``; the reason it could not be, or None."""
        rel = PurePosixPath(member.name)
        try:
            if member.isdir():
                make_dirs_beneath(staging, rel)
                return None
            source = tar.extractfile(member)  # streamed in chunks; runs of zeros stay holes
            size = write_stream_beneath(staging, rel, source if source is not None else io.BytesIO(),
                                        0o755 if member.mode & 0o100 else 0o644, max_bytes=member.size)
        except UnsafePath as exc:
            return f"not written: {exc}"
        except OSError as exc:  # e.g. a name longer than this file system holds
            return f"this host cannot take the name: {exc.strerror or exc}"
        report.files += 1
        report.bytes += size
        return None
