"""The host's caps on what it takes from a rollout or a session, and where each one is set.

Each cap is a setting (``veriscale.cli.settings.SPECS``: a flag, an environment variable and a
config-file key). The CLI resolves them by its one rule (flag > environment > file > default) and
hands its choice over through :mod:`veriscale.runtime`; library code and processes the CLI did not
start (skill scripts) read the environment variable through the same parser::

    caps = current()                           # HostCaps: the CLI's choice, else $VERISCALE_*, else defaults
    caps.zip_member_mb, caps.handback_max_files
    runtime.choose({"handback_max_files": 5000})   # what the CLI resolved from a flag or the file

=======================  ================================  ==========  ======================================
setting                  environment variable              default     caps
=======================  ================================  ==========  ======================================
``zip_member_mb``        ``VERISCALE_ZIP_MEMBER_MB``       32          MiB inflated from one zip member or pdf stream
``zip_file_mb``          ``VERISCALE_ZIP_FILE_MB``         128         MiB inflated from one file, all members together
``zip_members``          ``VERISCALE_ZIP_MEMBERS``         10000       entries of one zip
``view_timeout_s``       ``VERISCALE_VIEW_TIMEOUT_S``      60          seconds one text view may take
``view_memory_mb``       ``VERISCALE_VIEW_MEMORY_MB``      2048        MiB of address space a view may add
``handback_max_files``   ``VERISCALE_HANDBACK_MAX_FILES``  20000       files and folders one hand-back may carry
``handback_max_depth``   ``VERISCALE_HANDBACK_MAX_DEPTH``  64          folder depth a hand-back keeps
=======================  ================================  ==========  ======================================
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Callable

from veriscale import runtime
from veriscale.errors import UserError

#: the largest value any cap takes (2**40: a TiB in MiB, far past any real file)
MAX_VALUE = float(1 << 40)


def positive_number(text: str) -> float:
    """A finite number above 0 (and at most :data:`MAX_VALUE`) from ``text``; ValueError otherwise."""
    number = float(str(text).strip())
    if not (math.isfinite(number) and 0 < number <= MAX_VALUE):
        raise ValueError(text)
    return number


def positive_whole(text: str) -> int:
    """A whole number from 1 to :data:`MAX_VALUE` from ``text``; ValueError otherwise."""
    number = int(str(text).strip())
    if not 0 < number <= MAX_VALUE:
        raise ValueError(text)
    return number


@dataclass(frozen=True)
class Cap:
    """One cap: its environment variable, config-file key, default, parser, kind (for messages) and help."""

    env: str
    file: str
    default: float | int
    parse: Callable[[str], Any]
    kind: str
    help: str

    @property
    def whole(self) -> bool:
        return self.parse is positive_whole


_MIB = "a positive number of MiB"
_WHOLE = "a positive whole number"
CAPS: dict[str, Cap] = {
    "zip_member_mb": Cap("VERISCALE_ZIP_MEMBER_MB", "zip.member_mb", 32.0, positive_number, _MIB,
                         "MiB the host inflates from one zip member or pdf stream of a rollout file"),
    "zip_file_mb": Cap("VERISCALE_ZIP_FILE_MB", "zip.file_mb", 128.0, positive_number, _MIB,
                       "MiB the host inflates from one rollout file, all members together"),
    "zip_members": Cap("VERISCALE_ZIP_MEMBERS", "zip.members", 10_000, positive_whole, _WHOLE,
                       "entries one zip (xlsx, docx, pptx, a rollout zip) may hold"),
    "view_timeout_s": Cap("VERISCALE_VIEW_TIMEOUT_S", "view.timeout_s", 60.0, positive_number,
                          "a positive number of seconds", "seconds one text view of an office or pdf file may take"),
    "view_memory_mb": Cap("VERISCALE_VIEW_MEMORY_MB", "view.memory_mb", 2048.0, positive_number, _MIB,
                          "MiB of address space the text-view worker may add"),
    "handback_max_files": Cap("VERISCALE_HANDBACK_MAX_FILES", "handback.max_files", 20_000, positive_whole, _WHOLE,
                              "files and folders a session's hand-back may carry (more: none is kept)"),
    "handback_max_depth": Cap("VERISCALE_HANDBACK_MAX_DEPTH", "handback.max_depth", 64, positive_whole, _WHOLE,
                              "folder depth a session's hand-back keeps (deeper: left out, reported)"),
}


@dataclass(frozen=True)
class HostCaps:
    """Every cap's value; ``HostCaps()`` is the defaults."""

    zip_member_mb: float = CAPS["zip_member_mb"].default
    zip_file_mb: float = CAPS["zip_file_mb"].default
    zip_members: int = CAPS["zip_members"].default
    view_timeout_s: float = CAPS["view_timeout_s"].default
    view_memory_mb: float = CAPS["view_memory_mb"].default
    handback_max_files: int = CAPS["handback_max_files"].default
    handback_max_depth: int = CAPS["handback_max_depth"].default


def from_environment(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The cap ``name`` from its environment variable (None when unset or blank); a bad value is one sentence."""
    cap = CAPS[name]
    raw = (os.environ if environ is None else environ).get(cap.env, "")
    if not raw.strip():
        return None
    try:
        return cap.parse(raw)
    except ValueError:
        raise UserError(f"${cap.env} = {raw!r} is not {cap.kind}: fix it or unset it") from None


def current(environ: Mapping[str, str] | None = None) -> HostCaps:
    """Each cap: the CLI's choice, else its environment variable, else its default."""
    values: dict[str, Any] = {}
    for f in fields(HostCaps):
        value = runtime.chosen(f.name)  # a flag or the config file
        if value is None:
            value = from_environment(f.name, environ)
        if value is not None:
            values[f.name] = value
    return HostCaps(**values)
