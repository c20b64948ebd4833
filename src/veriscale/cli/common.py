"""Shared CLI plumbing: consoles, one-line errors, JSON output.

Every command body runs inside ``user_errors()`` so bad input ends with one sentence and a
non-zero exit instead of a traceback::

    with user_errors():
        result = compare(...)
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
from typing import Any, Iterator

import typer
from rich.console import Console
from rich.markup import escape

from veriscale.cli.flags import cli_text
from veriscale.schemas.output import SCHEMA_VERSION, cli_data, finite_data, schema_id, with_schema  # noqa: F401 (re-exported)
from veriscale.engine.run_scope import Terminated
from veriscale.errors import ModelCallError, UserError, one_line

console = Console()
err_console = Console(stderr=True)


def prompt_tokens_text(sent: int, processed: int | None) -> str:
    """``'93204 prompt tokens sent, 9725 processed'`` (``processed unknown`` when a server did not say)."""
    return f"{sent} prompt tokens sent, " + ("processed unknown" if processed is None else f"{processed} processed")


def fail(message: str, code: int = 2) -> None:
    """Print one error sentence on stderr (settings named as flags) and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {escape(one_line(cli_text(message)))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn veriscale's own errors (and Ctrl-C) into one line and an exit code."""
    try:
        yield
    except UserError as exc:
        fail(exc.template, exc.exit_code)
    except ModelCallError as exc:
        fail(exc.template, exc.exit_code)
    except Terminated:
        fail("stopped by SIGTERM; finished model calls are saved in the store and a rerun resumes", 143)
    except KeyboardInterrupt:
        fail("interrupted; finished model calls are saved in the store and a rerun resumes", 130)


def positive_seconds(value: float | None, flag: str, example: str) -> float | None:
    """``value`` (None: not given) if it is a finite number of seconds above 0, else one sentence naming
    ``flag``: NaN never compares past a deadline and infinity never arrives, so either would wait forever."""
    if value is None:
        return None
    if not math.isfinite(value):
        raise UserError(f"{flag} {value} is not a finite number of seconds: give the seconds, e.g. {flag} {example}")
    if value <= 0:
        raise UserError(f"{flag} {value:g} is not positive: give the seconds, e.g. {flag} {example}")
    return value


def quiet() -> bool:
    """Whether this invocation prints no progress and no informational note (``--quiet``,
    ``$VERISCALE_QUIET``, config ``output.quiet``); errors and warnings print anyway."""
    from veriscale.cli.settings import is_quiet

    return is_quiet()


def note(text: str, *, always: bool = False) -> None:
    """Print one library note on stderr, its settings named as flags; nothing under ``--quiet``
    unless ``always`` (a note the user must not miss, such as the weak embedded model's)."""
    if quiet() and not always:
        return
    from veriscale.shown_text import assembled  # a note may quote a candidate id or a model's reply

    err_console.print(assembled(("note: ", "yellow"), cli_text(text)), highlight=False, soft_wrap=True)


def info(*objects: Any, **print_kw: Any) -> None:
    """Print an informational line on stderr (``err_console.print``'s arguments); nothing under ``--quiet``."""
    if not quiet():
        err_console.print(*objects, **print_kw)



def json_text(payload: Any, **dumps: Any) -> str:
    """``payload`` (settings named as flags) as strict JSON: a NaN or infinite number is written as null,
    with one note saying so."""
    data, replaced = finite_data(cli_data(payload))
    if replaced:
        note(f"{replaced} value(s) were not finite numbers (NaN or infinity) and are written as null in the JSON")
    return escape_c1(json.dumps(data, ensure_ascii=False, default=str, allow_nan=False, **dumps))


_C1 = re.compile("[\x7f-\x9f\u2028\u2029]")


def escape_c1(text: str) -> str:
    """JSON ``text`` with DEL, the C1 controls (U+0080-U+009F: U+009B is an 8-bit CSI some terminals obey)
    and the line/paragraph separators written as ``\\uXXXX`` escapes; ``json.dumps`` already escapes
    C0 controls such as ESC. Still the same JSON: those characters only occur inside strings."""
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def emit_json(payload: Any, schema: str | None = None) -> None:
    """Write ``payload`` as JSON on stdout (for pipes), settings in its texts named as flags; always
    valid JSON (see :func:`json_text`). ``schema``: the output's kind (``"score"``), written as the
    top-level ``"schema": "veriscale.score/1"`` field (see :func:`with_schema`)."""
    sys.stdout.write(json_text(with_schema(payload, schema), indent=2) + "\n")


def write_json_file(path, payload: Any, what: str = "report") -> None:
    """Write ``payload`` (settings named as flags) as JSON at ``path``; one sentence if it cannot."""
    try:
        path.write_text(json_text(payload, indent=2), encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write the {what} to '{path}' ({exc.strerror}): pass a writable --output", 2)


def finish_with(run: Any, payload: dict[str, Any], output: Any = None, status: str = "ok") -> dict[str, Any]:
    """End the open run (a :class:`~veriscale.engine.run_scope.RunHandle`) with its result, write it
    to ``output`` if given; returns the payload with its run id."""
    run.finish(status, payload)
    payload = {**payload, "run_id": run.id}
    if output is not None:
        write_json_file(output, payload)
    return payload


def confirm_cost(reason: str, yes: bool) -> None:
    """Go on when ``yes``; else ask on a terminal, or stop with one sentence naming ``--yes``."""
    if yes:
        return
    if sys.stdin.isatty():
        typer.confirm(f"{reason}: proceed?", abort=True, err=True)
        return
    raise UserError(f"{reason}: pass --yes to run it (the cost estimate is above)")
