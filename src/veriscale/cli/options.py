"""Options shared by every command that calls a model, and the objects they build."""

from __future__ import annotations

import math
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Callable, Iterator, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from veriscale.cli.common import err_console, note, quiet
from veriscale.cli.settings import Settings, current
from veriscale.engine.store import Store
from veriscale.models.base import ModelBackend
from veriscale.models.uri import URI_FORMS, load_backend
from veriscale.models.weak_judge import EMBEDDED_NOTICE, uses_embedded

ModelOpt = Annotated[Optional[list[str]], typer.Option(
    "--model", "-m", help=f"Model URI ({URI_FORMS}) or a model name from the config file (a \\[models.NAME] table); repeat it for several "
    "endpoints of one model (load-balanced). Default: the config file's model, else embedded.")]
StoreOpt = Annotated[Optional[Path], typer.Option("--store", help="SQLite store (default: per-user data dir, or $VERISCALE_STORE).")]
ScaleOpt = Annotated[str, typer.Option("--scale", help="letters[:G] (A best, default G=20), digits[:G], yesno.")]
CriteriaOpt = Annotated[str, typer.Option("--criteria", "-c", help="Built-in set (general, agent), a Markdown file, or auto (auto:N): N criteria the model writes from the task's text.")]
SaveCriteriaOpt = Annotated[Optional[Path], typer.Option("--save-criteria", help="Write the criteria used (the generated ones with --criteria auto) to FILE as Markdown, to edit and pass back with --criteria FILE.")]
OnlyOpt = Annotated[Optional[list[str]], typer.Option("--criterion", help="Use only this criterion of the set (repeatable).")]
RepeatsOpt = Annotated[Optional[int], typer.Option("--repeats", help="K repeats (default 1 pointwise, 2 pairwise: pairwise repeats alternate slot order; --reasoning samples each anew).")]
ReasoningOpt = Annotated[bool, typer.Option("--reasoning", help="Let the model write a sampled analysis before each score.")]
DiscreteOpt = Annotated[bool, typer.Option("--discrete", help="Discrete-judge mode: use the argmax label instead of the expectation.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for sampled reasoning (part of the cache key).")]
RefreshOpt = Annotated[bool, typer.Option("--refresh", help="Ignore cached calls and ask the model again.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Write the result as JSON on stdout.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Only report the model calls and prompt tokens this would spend.")]
MaxCallsOpt = Annotated[Optional[int], typer.Option("--max-calls", help="Refuse to make more than this many new model calls.")]
RedactOpt = Annotated[Optional[list[str]], typer.Option(
    "--redact", help="Also redact text this regular expression matches (repeatable; added to the config file's "
    "redact.patterns); known key and token shapes are redacted anyway.")]
NoRedactOpt = Annotated[bool, typer.Option(
    "--no-redact", help="Show secrets as stored (config redact.enabled = false): for local debugging only.")]
ConcurrencyOpt = Annotated[Optional[int], typer.Option(
    "--concurrency", help="Parallel calls per HTTP endpoint (default: the config file's gateway.concurrency, else 4).")]
ExecutorOpt = Annotated[str, typer.Option(
    "--executor", help="Where the work runs: local (this process, default) or ray (Ray tasks: one a decision, bench item or "
    "trajectory; pip install 'veriscale\\[ray]').")]
AddressOpt = Annotated[Optional[str], typer.Option(
    "--address", help="The Ray cluster to join (HOST:PORT, ray://HOST:PORT or auto; default: a local Ray instance).")]


def ray_executor(executor: str, address: str | None, *, start: bool = True):
    """``--executor``/``--address`` checked: a started ``RayExecutor`` for ``ray`` (an unreachable
    cluster is one sentence before any work), None for ``local`` (and with ``start=False``: a
    ``--dry-run`` that sends nothing)."""
    from veriscale.errors import UserError, setting
    from veriscale.many.executors import EXECUTORS, RayExecutor

    if executor not in EXECUTORS:
        raise UserError(f"{setting('executor', executor)} is unknown: use local or ray")
    if address is not None and executor != "ray":
        raise UserError(f"{setting('address')} names a Ray cluster: add {setting('executor', 'ray')}, or drop "
                        f"{setting('address')}")
    if executor != "ray" or not start:
        return None
    runner = RayExecutor(address=address)
    runner.start()
    return runner


def command_settings(model: list[str] | str | None = None, store: Path | None = None,
                     concurrency: int | None = None) -> Settings:
    """This command's settings: the invocation's (global flags, environment, config file) with the
    command's own ``--model``, ``--store`` and ``--concurrency`` over them."""
    return current().with_flags(model=model, store=store, concurrency=concurrency)


def output_redactor(redact: list[str] | None, no_redact: bool):
    """What leaves the store goes through: the built-in secret shapes, the config file's patterns and
    ``--redact`` ones; nothing with ``--no-redact``. Example: ``output_redactor(["corp-\\w+"], False)(doc)``."""
    return current().with_flags(redact_secrets=False if no_redact else None).redactor(tuple(redact or ()))


_NOTICE_SHOWN = False


def open_model(settings: Settings, *, notice: bool = True) -> ModelBackend:
    """Load the backend (or an endpoint pool, for several endpoints or gateway limits) and say
    once, plainly, when it is the weak embedded model.

    ``notice=False`` (``--dry-run``, which makes no verdict) loads it without the note.
    """
    global _NOTICE_SHOWN
    from veriscale.engine.routing import EndpointPool

    backends = [load_backend(u) for u in settings.model_uris()]
    s = settings
    if len(backends) > 1 or s.rpm or s.tpm or s.deadline_s:
        backend = EndpointPool(backends, concurrency=s.concurrency, rpm=s.rpm or None, tpm=s.tpm or None,
                               routing=s.routing, deadline_s=s.deadline_s or None)
    else:
        backend = backends[0]
    if notice and uses_embedded(backend) and not _NOTICE_SHOWN:
        note(EMBEDDED_NOTICE, always=True)  # even under --quiet: a verdict of the weak model must never pass for a strong one
        _NOTICE_SHOWN = True
    return backend


def open_store(settings: Settings | Path | None) -> Store:
    """The store these settings name (``--store`` > ``$VERISCALE_STORE`` > the file's ``store`` >
    the per-user default); a path is taken as this command's ``--store``."""
    if not isinstance(settings, Settings):
        settings = command_settings(store=settings)
    return Store.open(settings.store)


class LineProgress:
    """Progress as plain lines on stderr, for a stderr that is not a terminal (a pipe, a log file,
    CI): ``progress: track 3/10 checkpoint calls (30 %, 2 s)`` at most once a second or every 10 %
    of the calls, and at the end; never on stdout, so ``--json`` there stays clean. Nothing is said
    before the first call finishes, so a command refused while it plans prints its one sentence alone."""

    def __init__(self, total: int, what: str, unit: str, *, every_s: float = 1.0, step: float = 0.1,
                 clock: Callable[[], float] = time.monotonic, write: Callable[[str], None] | None = None) -> None:
        self.total, self.what, self.unit, self.every_s, self.step, self.clock = total, what, unit, every_s, step, clock
        self.write = write or _stderr_line
        self.done, self.started = 0, clock()
        self._last_at, self._last_done = self.started, 0
        self._every_n = max(1, math.ceil(step * total))  # calls in one step of the share
        self._lock = threading.Lock()  # calls finish on the gateway's worker threads

    def _say(self) -> None:
        share = self.done / self.total if self.total else 1.0
        self.write(f"progress: {self.what} {self.done}/{self.total} {self.unit} "
                   f"({share * 100:.0f} %, {self.clock() - self.started:.0f} s)")

    def advance(self, _outcome=None) -> None:
        with self._lock:
            if self.done >= self.total:  # more calls than planned (adaptive selection): said once at the end
                return
            self.done += 1
            now = self.clock()
            if self.done == self.total or now - self._last_at >= self.every_s or self.done - self._last_done >= self._every_n:
                self._last_at, self._last_done = now, self.done
                self._say()

    def finish(self) -> None:
        """Say where it ended if the last line did not (an adaptive selection that stopped early)."""
        with self._lock:
            if self.done != self._last_done:
                self._last_done = self.done
                self._say()


def _stderr_line(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stderr never stops the command
        pass


@contextmanager
def call_progress(total: int, label: str, enabled: bool = True, *, what: str | None = None,
                  unit: str = "calls") -> Iterator[callable]:
    """Progress on stderr; yields the callback to advance it per finished call.

    On a terminal: a bar labelled ``label`` (not with ``enabled=False``, which commands pass with
    ``--json``). Elsewhere (stderr piped or in a file): :class:`LineProgress` lines naming ``what``
    (default ``label``) and ``unit``, with or without ``--json``: stdout carries only the result.
    Nothing at all under ``--quiet``.
    """
    if total == 0 or quiet():  # --quiet: no bar and no lines
        yield lambda _outcome=None: None
        return
    if not err_console.is_terminal:
        lines = LineProgress(total, what or label, unit)
        yield lines.advance
        lines.finish()
        return
    if not enabled:
        yield lambda _outcome=None: None
        return
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err_console, transient=True)
    with progress:
        task = progress.add_task(label, total=total)
        yield lambda _outcome=None: progress.advance(task)
