"""Errors a user can fix, and errors from model calls.

A ``UserError`` carries one sentence that names the bad input and the fix; the CLI prints it
and exits non-zero, never with a traceback::

    raise UserError("candidate file 'b.md' is empty: give it the candidate's answer text")
"""

from __future__ import annotations


class VeriscaleError(Exception):
    """Base class of every error veriscale raises on purpose."""


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
    """The work needs more uncached model calls than ``--max-calls`` allows."""
