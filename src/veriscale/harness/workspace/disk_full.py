"""One sentence for a task folder build that ran out of disk space: where, how much it needs, the fix.

    from veriscale.harness.workspace.disk_full import disk_full_error

    except OSError as exc:
        if exc.errno in DISK_FULL_ERRNOS:
            raise disk_full_error(exc, source, dest, staging) from None
    # UserError: "no space left on the disk of '/tmp' while building task folder 'tasks/t1' (it needs at
    #   least 1.2 GiB, the size of source 'exports/t1', plus its text views, 3.4 MiB free): free space
    #   there or point $TMPDIR at a larger disk; the partial task folder was removed"
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from veriscale.errors import UserError


def _human(size: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover


def _source_bytes(source: Path) -> int:
    """The bytes of the regular files below ``source`` (links not followed): what the copies need at least."""
    total = 0
    for folder, _dirs, files in os.walk(source):
        for name in files:
            try:
                info = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            total += info.st_size if os.path.isfile(os.path.join(folder, name)) else 0
    return total


def disk_full_error(exc: OSError, source: Path, dest: Path, staging: Path | None = None) -> UserError:
    """One sentence for a write that ran out of space: where, how much is needed, and that nothing is left behind.

    ``staging``: the temporary folder rollouts were being copied into when the disk filled (else the
    destination's disk was full)."""
    if staging is not None:
        disk, fix = staging.parent, "free space there or point $TMPDIR at a larger disk"
    else:
        disk = next((p for p in (dest, *dest.parents) if p.is_dir()), dest)
        fix = "free space there or choose a destination on a larger disk"
    try:
        free = f", {_human(shutil.disk_usage(disk).free)} free"
    except OSError:
        free = ""
    return UserError(
        f"no space left on the disk of '{disk}' while building task folder '{dest}' "
        f"(it needs at least {_human(_source_bytes(source))}, the size of source '{source}', plus its text views{free}): "
        f"{fix}; the partial task folder was removed"
    )
