"""Hand a session's output folder back to the host: read the tar stream, check it, swap it in.

Inside the jail the output folder is a size-capped tmpfs, seeded from the host's copy and
streamed back as a tar when the command ends (``jail_inside.py``). The host never trusts that
stream: it reads at most ``cap_bytes``, keeps regular files and folders whose names stay inside
the folder and carry no control characters, writes each file itself (mode 0644, folders 0755,
owned by the host user: no set-ID bit, no link, no FIFO or device survives), and only then
swaps the new folder in. A stream that is missing, malformed or over the cap changes nothing::

    reader = HarvestReader(read_fd, cap_bytes=limits.output_bytes)
    ...                                    # the jail runs
    report = reader.apply(Path("runs/x/sessions/resolve"))
    report.ok, report.files, report.left_out, report.error
"""

from __future__ import annotations

import os
import re
import tarfile
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from veriscale.harness.safe_fs import make_plain_dir, remove_tree, write_plain_file

#: tar headers cost 512 bytes a member (+ PAX records): this much on top of the output cap.
STREAM_SLACK_BYTES = 16 << 20
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass
class HarvestReport:
    """What came back from the jail."""

    ok: bool = False
    files: int = 0
    bytes: int = 0
    left_out: list[str] = field(default_factory=list)
    error: str | None = None


def _bad_name(name: str) -> str | None:
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or ".." in parts:
        return "leaves the folder"
    if _CONTROL.search(name):
        return "control character in the name"
    return None


class HarvestReader:
    """Drains the harvest pipe in a thread into a spool file, stopping at the cap."""

    def __init__(self, read_fd: int, cap_bytes: int) -> None:
        self.cap_bytes = cap_bytes
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

    def apply(self, dest: Path) -> HarvestReport:
        """Check the stream and, when it is sound, make ``dest`` hold exactly what it carries."""
        self.join(5.0)
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
            self._extract(staging, report)
        except (tarfile.TarError, OSError, ValueError, EOFError) as exc:
            remove_tree(staging)
            report.error = f"the session's output stream is malformed ({exc})"
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

    def _extract(self, staging: Path, report: HarvestReport) -> None:
        with tarfile.open(fileobj=self._spool, mode="r:") as tar:
            for member in tar:
                why = _bad_name(member.name)
                if why is None and not (member.isdir() or member.isreg()):
                    why = "not a regular file or folder"
                if why is None and report.bytes + member.size > self.cap_bytes:
                    why = f"over the {self.cap_bytes}-byte output cap"
                if why is not None:
                    report.left_out.append(f"{member.name!r} ({why})")
                    continue
                target = staging.joinpath(*PurePosixPath(member.name).parts)
                if member.isdir():
                    make_plain_dir(target)
                    continue
                make_plain_dir(target.parent)
                source = tar.extractfile(member)
                data = source.read() if source is not None else b""
                write_plain_file(target, data, 0o755 if member.mode & 0o100 else 0o644)
                report.files += 1
                report.bytes += len(data)
