"""Shared CLI plumbing: consoles, one-line errors, JSON output.

Every command body runs inside ``user_errors()`` so bad input ends with one sentence and a
non-zero exit instead of a traceback::

    with user_errors():
        result = compare(...)
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any, Iterator

import typer
from rich.console import Console

from veriscale.errors import ModelCallError, UserError

console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    """Print one error sentence on stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn veriscale's own errors (and Ctrl-C) into one line and an exit code."""
    try:
        yield
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    except ModelCallError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted; finished model calls are saved in the store and a rerun resumes", 130)


def emit_json(payload: Any) -> None:
    """Write ``payload`` as JSON on stdout (for pipes)."""
    sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n")
