"""docs/ARCHITECTURE.md names every module and sub-package of veriscale.

What is checked: every package folder under ``src/veriscale`` (a folder with an ``__init__.py``)
and every ``.py`` file directly in one, except ``__init__.py`` and ``__main__.py``. Files in
folders that are not packages (the skill scripts under ``harness/skills/<skill>/scripts/`` and
``harness/skills/_lib/``, copied into sessions, never imported as veriscale modules) are not.

The rule, for a module or package whose path relative to ``src/veriscale`` is P (a package's P
ends in ``/``, e.g. ``harness/jail/``), and whose top-level package is T (the first part of P;
none for a top-level module such as ``config.py``): P is named when

  1. some backticked span anywhere in the doc is P, optionally prefixed with ``veriscale/`` or
     ``src/veriscale/`` (``selection/core/tournament.py``, ``src/veriscale/verify/reward.py``); or
  2. some backticked span inside T's bullet in "## Packages" (the bullet that opens with
     ``- **`T/`**``, up to the next bullet or heading) is a trailing part of P: its file name
     (``sandbox.py``), or more of its tail (``jail/sandbox.py``, ``jail/``).

Spans are read whole: ``uri.load_backend`` in backticks names no module, and
`` `registry.py`/`schemes.py` `` names both files.
"""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "veriscale"
DOC = REPO / "docs" / "ARCHITECTURE.md"

_SPAN = re.compile(r"`([^`\n]+)`")
_PREFIXES = ("src/veriscale/", "veriscale/")


def package_entries() -> list[str]:
    """Each sub-package (``harness/jail/``) and module (``harness/jail/sandbox.py``), sorted."""
    packages = [PACKAGE]  # a package is a folder with __init__.py inside a package
    for folder in packages:
        packages += sorted(f for f in folder.iterdir() if f.is_dir() and (f / "__init__.py").is_file())
    entries = [f"{folder.relative_to(PACKAGE).as_posix()}/" for folder in packages[1:]]
    for folder in packages:
        for path in folder.glob("*.py"):
            if path.name not in {"__init__.py", "__main__.py"}:
                entries.append(path.relative_to(PACKAGE).as_posix())
    return sorted(entries)


def spans(text: str) -> set[str]:
    found = set()
    for span in _SPAN.findall(text):
        span = span.strip()
        for prefix in _PREFIXES:
            if span.startswith(prefix):
                span = span[len(prefix):]
                break
        found.add(span)
    return found


def package_sections(doc: str) -> dict[str, str]:
    """Top-level package name -> the text of its bullet under "## Packages"."""
    sections: dict[str, str] = {}
    current = None
    for line in doc.splitlines():
        opening = re.match(r"- \*\*`([A-Za-z_]+)/`\*\*", line)
        if opening:
            current = opening.group(1)
            sections[current] = line + "\n"
        elif line.startswith(("- ", "#")):
            current = None
        elif current is not None:
            sections[current] += line + "\n"
    return sections


def tails(path: str) -> set[str]:
    """``harness/jail/sandbox.py`` -> {sandbox.py, jail/sandbox.py, harness/jail/sandbox.py}."""
    parts = path.rstrip("/").split("/")
    slash = "/" if path.endswith("/") else ""
    return {"/".join(parts[i:]) + slash for i in range(len(parts))}


def missing_entries(doc: str) -> list[str]:
    everywhere = spans(doc)
    in_section = {name: spans(text) for name, text in package_sections(doc).items()}
    missing = []
    for entry in package_entries():
        if entry in everywhere:
            continue
        top = entry.split("/", 1)[0] if "/" in entry.rstrip("/") else None
        if top is not None and tails(entry) & in_section.get(top, set()):
            continue
        missing.append(entry)
    return missing


def test_rule_sees_the_modules():
    entries = package_entries()
    assert "selection/core/tournament.py" in entries
    assert "harness/jail/" in entries
    assert "config.py" in entries
    assert not any(e.endswith(("__init__.py", "__main__.py")) for e in entries)
    assert not any("/scripts/" in e or "_lib" in e for e in entries)


def test_architecture_doc_names_every_module():
    missing = missing_entries(DOC.read_text(encoding="utf-8"))
    assert not missing, (
        f"docs/ARCHITECTURE.md does not name {len(missing)} module(s) of src/veriscale:\n  "
        + "\n  ".join(missing)
        + "\nAdd each, in backticks with a short phrase from its docstring, to the bullet of its "
        "top-level package under '## Packages' (`- **`engine/`**` etc.; its file name there is "
        "enough, e.g. `sandbox.py` in the harness/ bullet), or give its full path "
        "(`harness/jail/sandbox.py`) anywhere in the doc. Top-level modules (`config.py`) go in "
        "the last bullet."
    )
