"""The inflation caps of veriscale (``harness/workspace/zip_limits.py``) for skill scripts.

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_lib"))
    from office_caps import problem
    if problem(args.book):            # one sentence naming the file and the cap, or None
        ...

Where veriscale is importable (a session run with the jail off, on the host) every zip part and
pdf flate stream of the file is inflated once and counted before the script's library opens it.
Inside the jail, where it may not be, the jail's memory and time limits bound the script.
"""

import importlib.util
import sys
import types
from pathlib import Path


def _zip_limits():
    """veriscale's zip_limits module, imported without veriscale/__init__ (the scoring stack); or None."""
    if "veriscale" not in sys.modules:
        try:
            spec = importlib.util.find_spec("veriscale")
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.submodule_search_locations:
            return None
        package = types.ModuleType("veriscale")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["veriscale"] = package
    try:
        from veriscale.harness.workspace import zip_limits
    except Exception:  # noqa: BLE001 - a package this process cannot load is no package
        return None
    return zip_limits


def problem(path):
    """Why ``path`` must not be opened (over a cap, or a lying zip), or None when it may be."""
    caps = _zip_limits()
    if caps is None:
        return None
    file = Path(path)
    limits = caps.ZipLimits.from_env()
    try:
        if file.suffix.lower() == ".pdf":
            caps.checked_pdf(file, limits, f"'{path}'")
        else:
            caps.checked_zip(file, limits, f"'{path}'")
    except caps.ArchiveRefused as exc:
        return str(exc)
    except caps.ZIP_ERRORS as exc:
        return f"cannot read {path}: {type(exc).__name__}: {exc}"
    return None
