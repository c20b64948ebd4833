"""The delivery gate: it keeps every file of the base in the delivered bundle, and no office file
that points outside itself.

A file the delivery dropped is restored from the base; every file is reported with its sha256
and whether it changed. The one content check (:mod:`veriscale.harness.workspace.office_content`)
runs on every delivered file and on every base file it restores: an office file (any zip holding
``[Content_Types].xml``, whatever its name) with an external workbook link, an external
relationship other than a hyperlink, a formula into another workbook or a DTD is refused, removed
from the bundle and reported in one sentence (a delivered file the base also holds is then
restored from the base, as a dropped one is). A file the check cannot open within the zip caps
is refused too::

    report = keep_base_files(Path("rollouts/r03/deliverables"), Path("out/deliverables"))
    report["restored"], report["changed"], report["refused"]   # [{"path": "model.xlsx", "reason": "model.xlsx was refused: ..."}]
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from veriscale.harness.jsonfiles import json_text
from veriscale.harness.protocol.layout import DELIVERABLES_SUBDIR, FINISH_FILE
from veriscale.harness.safe_fs import (
    UnsafePath,
    open_dir_beneath,
    open_regular_beneath,
    read_bytes_beneath,
    walk_entries,
)
from veriscale.harness.safe_write import (
    copy_plain_tree,
    make_plain_dir,
    remove_beneath,
    remove_tree,
    write_beneath,
)
from veriscale.harness.workspace.office_content import office_refusal, refuse_office_files
from veriscale.harness.workspace.text_views import is_sidecar
from veriscale.harness.workspace.zip_limits import ZipLimits

#: The largest deliverable file the gate hashes or copies.
MAX_FILE_BYTES = 1 << 30


def sha256_file(path: Path, root: Path | None = None) -> str:
    """sha256 of a regular file, opened without following a link.

    ``sha256_file(Path("a/b.txt"), folder)``: ``path`` is relative to ``root`` and no folder
    below ``root`` may be a link (opened one component at a time, so any depth works).
    """
    digest = hashlib.sha256()
    if root is None:
        root, path = path.parent, Path(path.name)
    fd = open_regular_beneath(root, path, max_bytes=MAX_FILE_BYTES)
    with open(fd, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _bundle_files(folder: Path | None) -> tuple[dict[str, Path], list[str]]:
    """Regular files of a bundle (no sidecars) by relative path, and what else it holds."""
    if folder is None or not folder.is_dir() or folder.is_symlink():
        return {}, []
    files, other = {}, []
    for rel, info in walk_entries(folder):  # iterative: any depth
        if stat.S_ISDIR(info.st_mode):
            continue
        if stat.S_ISREG(info.st_mode) and not is_sidecar(Path(rel.name)):
            files[rel.as_posix()] = folder.joinpath(*rel.parts)
        elif not stat.S_ISREG(info.st_mode):
            other.append(rel.as_posix())
    return files, other


def _clear_the_way(folder: Path, rel: str) -> None:
    """Remove a folder or link standing at ``folder/rel`` (by descriptor: any depth)."""
    parts = PurePosixPath(rel).parts
    try:
        parent = open_dir_beneath(folder, PurePosixPath(*parts[:-1]) if len(parts) > 1 else "")
    except UnsafePath:
        return  # no folder there yet: write_beneath makes it (and refuses a link on the way)
    try:
        info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode):
            remove_beneath(parent, parts[-1])
    except FileNotFoundError:
        pass
    finally:
        os.close(parent)


def keep_base_files(base_dir: Path | None, delivered_dir: Path, limits: ZipLimits | None = None) -> dict[str, Any]:
    """The gate: refuse office files that point outside themselves, restore every base file missing
    from ``delivered_dir``; report each file.

    Anything in the delivered bundle that is not a regular file or folder (a link, a FIFO) is
    removed. Returns ``{"files": [{"path", "status", "base_sha256", "sha256"}], "restored": [...],
    "changed": [...], "added": [...], "removed_links": [...], "refused": [{"path", "reason"}]}``
    where status is ``unchanged``, ``changed``, ``restored``, ``added`` or ``refused`` (a base file
    the content check refused: it is not restored).
    """
    limits = limits or ZipLimits.from_env()
    make_plain_dir(delivered_dir)
    delivered, removed = _bundle_files(delivered_dir)
    for rel in removed:
        remove_tree(delivered_dir / rel)
    refused = [{"path": rel, "reason": refusal.sentence} for rel, refusal in refuse_office_files(delivered_dir, limits)]
    delivered, _ = _bundle_files(delivered_dir)
    base, _ = _bundle_files(base_dir)
    files = []
    for rel in base:
        base_sha = sha256_file(Path(rel), base_dir)
        if rel not in delivered:
            data = read_bytes_beneath(base_dir, rel, max_bytes=MAX_FILE_BYTES)
            refusal = office_refusal(data, f"base file {rel}", limits)
            if refusal is not None:
                refused.append({"path": rel, "reason": refusal.sentence})
                files.append({"path": rel, "status": "refused", "base_sha256": base_sha, "sha256": None})
                continue
            _clear_the_way(delivered_dir, rel)
            # write_beneath refuses a link or a file anywhere below the delivered folder itself
            write_beneath(delivered_dir, rel, data)
            files.append({"path": rel, "status": "restored", "base_sha256": base_sha, "sha256": base_sha})
            continue
        sha = sha256_file(Path(rel), delivered_dir)
        files.append({"path": rel, "status": "unchanged" if sha == base_sha else "changed",
                      "base_sha256": base_sha, "sha256": sha})
    for rel, path in delivered.items():
        if rel not in base:
            files.append({"path": rel, "status": "added", "base_sha256": None, "sha256": sha256_file(Path(rel), delivered_dir)})
    files.sort(key=lambda f: f["path"])
    by_status = {s: [f["path"] for f in files if f["status"] == s] for s in ("restored", "changed", "added")}
    return {"files": files, **by_status, "removed_links": removed, "refused": refused}


def copy_base(base_dir: Path | None, delivered_dir: Path) -> None:
    """Make ``delivered_dir`` an exact copy of the base deliverables (sidecars left out).

    Whatever stood at ``delivered_dir`` (a folder, or a link a session planted) is removed, never
    written through.
    """
    if delivered_dir.exists() or delivered_dir.is_symlink():
        remove_tree(delivered_dir)
    if base_dir is None:
        make_plain_dir(delivered_dir)
        return
    copy_plain_tree(base_dir, delivered_dir, skip=lambda rel: is_sidecar(Path(rel.name)), max_bytes=MAX_FILE_BYTES)


def publish_delivery(deliverables: Path, finish: dict[str, Any], dest: Path) -> Path:
    """Write the host's delivery (what ``harness score`` reads): ``dest/finish.json`` + ``dest/deliverables/``."""
    if dest.exists() or dest.is_symlink():
        remove_tree(dest)
    make_plain_dir(dest)
    copy_plain_tree(deliverables, dest / DELIVERABLES_SUBDIR, max_bytes=MAX_FILE_BYTES)
    write_beneath(dest, FINISH_FILE, json_text(finish).encode())
    return dest


__all__ = ["UnsafePath", "copy_base", "keep_base_files", "publish_delivery", "sha256_file"]
