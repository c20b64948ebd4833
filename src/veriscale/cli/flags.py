"""The command line's words for library settings (kept for compatibility): see
:mod:`veriscale.settings.words`, where they live."""

from __future__ import annotations

from veriscale.settings.words import FLAG_FOR, cli_text, flag_for

__all__ = ["FLAG_FOR", "cli_text", "flag_for"]
