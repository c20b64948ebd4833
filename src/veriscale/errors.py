"""Errors a user can fix, and errors from model calls.

A ``UserError`` carries one sentence that names the bad input and the fix. A setting the user
can change is written with :func:`setting`, so each front end names it in its own words: Python
callers read the keyword (``max_calls``), the CLI prints the flag (``--max-calls``)::

    raise UserError(f"this needs 12 new model calls but the budget ({setting('max_calls')}) allows 3")
    str(err)                               # '... the budget (max_calls) allows 3'
    phrase(err.template, cli_flag_for)     # '... the budget (--max-calls) allows 3'

Library code never spells a flag; only ``veriscale.cli`` turns settings into flags.
"""

from __future__ import annotations

import re
from typing import Callable

_OPEN, _SEP, _CLOSE = "\u2039", "\u2016", "\u203a"
_SETTING = re.compile(f"{_OPEN}([A-Za-z_][A-Za-z0-9_]*)(?:{_SEP}([^{_CLOSE}]*))?{_CLOSE}")

SettingNamer = Callable[[str, "str | None"], str]


def setting(name: str, value: object = None) -> str:
    """A reference to the setting ``name`` (and a value for it) inside a message.

    ``setting("scale", "letters:20")`` reads ``scale='letters:20'`` from Python and
    ``--scale letters:20`` on the command line.
    """
    return f"{_OPEN}{name}{'' if value is None else _SEP + str(value)}{_CLOSE}"


def python_name(name: str, value: str | None) -> str:
    """How a Python caller reads a setting: the keyword, with its value when one is given."""
    if value is None:
        return name
    return f"{name}={value}" if re.fullmatch(r"-?\d+(\.\d+)?", value) else f"{name}={value!r}"


def phrase(text: str, namer: SettingNamer = python_name) -> str:
    """``text`` with every :func:`setting` reference spelled by ``namer``."""
    return _SETTING.sub(lambda m: namer(m[1], m[2]), text)


def settings_in(text: str) -> list[str]:
    """The setting names ``text`` refers to, in order."""
    return [m[1] for m in _SETTING.finditer(text)]


class Worded(str):
    """A note or warning that names settings: it reads with Python names, like an error's ``str()``,
    and keeps its references in ``template`` so the CLI can name flags instead::

        note = worded(f"use {setting('reasoning')} to sample anew")
        note                 # 'use reasoning to sample anew'
        note.template        # the text with the reference, for veriscale.settings.words.cli_text
    """

    template: str

    def __new__(cls, template: str) -> "Worded":
        text = super().__new__(cls, phrase(template))
        text.template = template
        return text


def worded(text: str) -> str:
    """``text`` as a :class:`Worded` when it names a setting, else unchanged."""
    return Worded(text) if settings_in(text) else text


def one_line(text: str) -> str:
    """``text`` with control characters and lone surrogates escaped (``"a\\nb"`` for a newline)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class VeriscaleError(Exception):
    """Base class of every error veriscale raises on purpose.

    ``template`` is the message with its setting references; ``str()`` spells them as Python names.
    """

    @property
    def template(self) -> str:
        """The message, on one line: a newline or other control character from an input it quotes
        is shown escaped (``\\n``), so every error stays one sentence."""
        return one_line(str(self.args[0])) if self.args else ""

    def __str__(self) -> str:
        return phrase(self.template)


class UserError(VeriscaleError):
    """Bad input, configuration or environment: the message says what and how to fix it."""

    exit_code = 2


class ModelCallError(VeriscaleError):
    """A model call failed after its retries; the verdict that needed it is marked failed."""

    exit_code = 3

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class BudgetExceeded(UserError):
    """The work needs more uncached model calls than the ``max_calls`` budget allows."""


class StoreFault(UserError):
    """A fault of the store file itself (damaged, locked, read-only, full disk); ``kind`` names it
    (``veriscale.engine.store_faults`` makes them)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind
