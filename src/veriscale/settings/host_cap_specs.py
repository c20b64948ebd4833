"""The host caps as settings data: each cap's environment variable, config-file key, default and
parser (:data:`CAPS`). Plain data, so the registry builds their specs without importing the harness;
``veriscale.harness.host_caps`` reads their values::

    CAPS["view_timeout_s"].default      # 60.0
    positive_whole("12")                # 12; "0", "x" and 2**41 raise ValueError
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

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
