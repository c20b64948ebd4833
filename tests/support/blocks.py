"""Test helper: read a rendered prompt back into its data blocks and the lines outside them.

A block is a line ``<<<NAME tag>>>``, its body, and the line ``<<<END NAME tag>>>``; the reader
follows the fence format exactly, so a fake or escaped marker inside a body never ends a block::

    outside, blocks = split_blocks(prompt)
    blocks["RESPONSE"]     # the body of the RESPONSE block
    outside                # the prompt's own lines: headers, instructions, the slot question
"""

from __future__ import annotations

import re

_OPEN = re.compile(r"<<<([A-Z][A-Z0-9_]*) ([0-9a-f]{8})>>>")


def split_blocks(prompt: str) -> tuple[list[str], dict[str, str]]:
    """(lines outside any block, {block name: body}); an unclosed block raises AssertionError."""
    outside: list[str] = []
    blocks: dict[str, str] = {}
    lines = prompt.split("\n")
    i = 0
    while i < len(lines):
        m = _OPEN.fullmatch(lines[i])
        if not m:
            outside.append(lines[i])
            i += 1
            continue
        end = f"<<<END {m.group(1)} {m.group(2)}>>>"
        assert end in lines[i + 1:], f"block {m.group(1)} is never closed"
        j = lines.index(end, i + 1)
        assert m.group(1) not in blocks, f"block {m.group(1)} appears twice"
        blocks[m.group(1)] = "\n".join(lines[i + 1:j])
        i = j + 1
    return outside, blocks
