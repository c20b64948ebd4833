"""The host's caps on what it takes from a rollout or a session, and where each one is set.

Each cap is a setting (``veriscale.settings.registry.SPECS``: a flag, an environment variable and a
config-file key). The CLI resolves them by the one rule (flag > environment > file > default) and
hands its choice over (:func:`veriscale.settings.choose`); library code and processes the CLI did not
start (skill scripts) read the environment variable through the settings layer's one reader::

    caps = current()                           # HostCaps: the CLI's choice, else $VERISCALE_*, else defaults
    caps.zip_member_mb, caps.handback_max_files
    settings.choose({"handback_max_files": 5000})  # what the CLI resolved from a flag or the file

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

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from veriscale import settings
from veriscale.settings.host_cap_specs import CAPS, MAX_VALUE, Cap, positive_number, positive_whole  # noqa: F401 (re-exported)

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
    return settings.from_environment(name, environ)  # the one reader, the registry's parse and sentence


def current(environ: Mapping[str, str] | None = None) -> HostCaps:
    """Each cap: the CLI's choice, else its environment variable, else its default."""
    values: dict[str, Any] = {}
    for f in fields(HostCaps):
        value = settings.chosen(f.name)  # a flag or the config file
        if value is None:
            value = from_environment(f.name, environ)
        if value is not None:
            values[f.name] = value
    return HostCaps(**values)
