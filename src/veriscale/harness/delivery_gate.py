"""The delivery gate: content-blind, it keeps every file of the base in the delivered bundle.

A file the delivery dropped is restored from the base; every file is reported with its sha256
and whether it changed::

    report = keep_base_files(Path("rollouts/r03/deliverables"), Path("out/deliverables"))
    report["restored"], report["changed"]
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from veriscale.harness.views import is_sidecar




def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _bundle_files(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    return {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*"))
            if (p.is_file() or p.is_symlink()) and not is_sidecar(p)}


def keep_base_files(base_dir: Path | None, delivered_dir: Path) -> dict[str, Any]:
    """Content-blind gate: restore every base file missing from ``delivered_dir``; report each file.

    Links in the delivered bundle are removed (a bundle holds plain files). Returns
    ``{"files": [{"path", "status", "base_sha256", "sha256"}], "restored": [...], "changed": [...], "added": [...]}``
    where status is ``unchanged``, ``changed``, ``restored`` or ``added``.
    """
    delivered_dir.mkdir(parents=True, exist_ok=True)
    removed_links = []
    for rel, path in _bundle_files(delivered_dir).items():
        if path.is_symlink():
            path.unlink()
            removed_links.append(rel)
    base = _bundle_files(base_dir) if base_dir is not None else {}
    delivered = _bundle_files(delivered_dir)
    files = []
    for rel, source in base.items():
        base_sha = sha256_file(source)
        target = delivered_dir / rel
        if rel not in delivered:
            if target.is_dir():
                shutil.rmtree(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            files.append({"path": rel, "status": "restored", "base_sha256": base_sha, "sha256": base_sha})
            continue
        sha = sha256_file(target)
        files.append({"path": rel, "status": "unchanged" if sha == base_sha else "changed",
                      "base_sha256": base_sha, "sha256": sha})
    for rel, path in delivered.items():
        if rel not in base:
            files.append({"path": rel, "status": "added", "base_sha256": None, "sha256": sha256_file(path)})
    files.sort(key=lambda f: f["path"])
    by_status = {s: [f["path"] for f in files if f["status"] == s] for s in ("restored", "changed", "added")}
    return {"files": files, **by_status, "removed_links": removed_links}


def copy_base(base_dir: Path | None, delivered_dir: Path) -> None:
    """Make ``delivered_dir`` an exact copy of the base deliverables (sidecars left out)."""
    if delivered_dir.exists():
        shutil.rmtree(delivered_dir)
    delivered_dir.mkdir(parents=True)
    for rel, source in (_bundle_files(base_dir) if base_dir is not None else {}).items():
        target = delivered_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


# --- running ----------------------------------------------------------------------------------
