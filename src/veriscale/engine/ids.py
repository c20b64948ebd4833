"""Row ids a person gives (a run, a job): whole numbers from 1 to ``MAX_ID`` (SQLite's largest).

    parse_id("12", "run", "`veriscale runs list`")       # 12
    parse_id("9223372036854775808", "run", "...")        # UserError: one sentence, no OverflowError
    valid_id(-3)                                         # False: no row has it
"""

from __future__ import annotations

from veriscale.errors import UserError

MAX_ID = 2**63 - 1  # SQLite stores integers in 8 bytes


def valid_id(value: object) -> bool:
    """True when ``value`` is an int some row could have (a bool is not an id)."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_ID


def parse_id(text: str, what: str, listing: str) -> int:
    """``text`` as a row id; else a UserError naming ``what`` and where ids are listed."""
    stripped = text.strip()
    value = int(stripped) if stripped.isascii() and stripped.lstrip("+-").isdigit() and len(stripped) <= 40 else None
    if value is None or not valid_id(value):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise UserError(f"'{shown}' is not a {what} id: give a whole number from 1 to {MAX_ID}, as {listing} shows")
    return value
