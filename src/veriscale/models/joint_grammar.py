"""A GBNF grammar that holds a joint reply to its format: each header, then one score label.

llama.cpp's servers (``llama_cpp.server`` and the C++ ``llama-server``) take a ``grammar`` field in
a completion request and sample only what it allows, while the logprobs they report stay the
model's own. A joint reply then reaches every slot, written the way the prompt asked, and each
slot's grade is the model's most likely label (greedy) — the teacher forcing the embedded model
does in process::

    joint_gbnf(["Correctness:", "\\nCompleteness:"], ("1", "2", "3"))   # the prompt ends at "Correctness:"
    # 'root ::= " "? label "\\nCompleteness:" " "? label\\nlabel ::= "1" | "2" | "3"\\n'
    joint_gbnf(["Correctness:", "\\nCompleteness:"], labels, first_header=True)   # chat: no prefill

The same format as a regular expression, for vLLM's ``structured_outputs: {"regex": ...}`` and
SGLang's ``regex`` field::

    joint_regex(["Correctness:", "\\nCompleteness:"], ("1", "2", "3"))
    # ' ?(?:1|2|3)\\nCompleteness: ?(?:1|2|3)'

Which constraint a server takes is found by the read probe (``veriscale.models.read_probe``); a
server that takes none scores each criterion separately (joint without a constraint costs more).
"""

from __future__ import annotations

from collections.abc import Sequence


def _literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


def joint_gbnf(headers: Sequence[str], labels: Sequence[str], *, first_header: bool = False) -> str:
    """The grammar of a joint reply: an optional space and a label after each header.

    ``headers``: every slot's header in order; the first is written by the model only when
    ``first_header`` (a chat request, which cannot prefill it), else the prompt already ends with it."""
    if not labels:
        raise ValueError("a joint grammar needs score labels")
    parts = []
    for n, header in enumerate(headers):
        if n or first_header:
            parts.append(_literal(header))
        parts.append('" "? label')
    return "root ::= " + " ".join(parts) + "\nlabel ::= " + " | ".join(_literal(lab) for lab in labels) + "\n"


_REGEX_SPECIAL = set(".^$*+?{}[]\\|()")


def _regex_literal(text: str) -> str:
    """``text`` matched literally (metacharacters escaped; a newline as ``\\n``, a space as itself)."""
    return "".join("\\" + ch if ch in _REGEX_SPECIAL else "\\n" if ch == "\n" else "\\r" if ch == "\r" else ch
                   for ch in text)


def joint_regex(headers: Sequence[str], labels: Sequence[str], *, first_header: bool = False) -> str:
    """The joint reply's format as a regular expression (see :func:`joint_gbnf`)."""
    if not labels:
        raise ValueError("a joint regex needs score labels")
    label = "(?:" + "|".join(_regex_literal(lab) for lab in labels) + ")"
    parts = []
    for n, header in enumerate(headers):
        if n or first_header:
            parts.append(_regex_literal(header))
        parts.append(" ?" + label)
    return "".join(parts)


__all__ = ["joint_gbnf", "joint_regex"]
