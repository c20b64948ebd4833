"""Adaptive stopping's effect on the call count is said in words, never as "-6 calls saved"
(the README job on the embedded model once printed that when a close pair was judged again)."""

from __future__ import annotations

from veriscale.selection.select import adaptive_calls_text


def test_calls_saved_read_as_saved_and_extra_calls_as_more_than_planned() -> None:
    assert adaptive_calls_text(6) == "6 model calls saved"
    assert adaptive_calls_text(0) == "0 model calls saved"
    assert adaptive_calls_text(-6) == "6 more model calls than planned"
    assert "-" not in adaptive_calls_text(-6)
