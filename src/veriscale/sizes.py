"""Sizes as people write them: ``parse_size("512M")`` -> 536870912 (K, M, G, T are powers of 1024)."""

from __future__ import annotations

import re

from veriscale.errors import UserError

GIB, MIB = 1 << 30, 1 << 20


def parse_size(text: str) -> int:
    """``'512M'`` -> 536870912; plain numbers are bytes; K, M, G, T suffixes are powers of 1024."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", str(text), re.IGNORECASE)
    if not match:
        raise UserError(f"size {text!r} is not a size: give bytes or a number with K, M or G (e.g. 512M)")
    factor = 1024 ** " KMGT".index(match.group(2).upper() or " ")
    return int(float(match.group(1)) * factor)
