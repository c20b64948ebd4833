"""``veriscale harness jail-run`` and the jail-limit flags shared with ``harness run``.

Example::

    veriscale harness jail-run tasks/t1 --phase resolve -- sh -c 'id; ls; cat /proc/sys/kernel/core_pattern'
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from veriscale.cli.common import err_console, info, user_errors
from veriscale.cli.flags import cli_text
from veriscale.shown_text import for_terminal

MEMORY = typer.Option("2G", "--jail-memory", help="Memory of one session (cgroup; RLIMIT_AS where no cgroup is writable).")
PIDS = typer.Option(256, "--jail-pids", help="Processes and threads of one session.")
CPU = typer.Option(900, "--jail-cpu", help="CPU seconds per session process (RLIMIT_CPU).")
TMPFS = typer.Option("256M", "--jail-tmpfs", help="Size of each scratch tmpfs (/tmp, /var/tmp, /run, /dev/shm, $HOME).")
OUTPUT = typer.Option("512M", "--jail-output", help="Size cap of a session's output folder.")
CAPTURE = typer.Option("4M", "--jail-capture", help="Bytes kept of a session command's stdout and of its stderr (head and tail).")
RELAY = typer.Option(16, "--relay-connections", help="Model connections one session may hold open at once.")
CPUS = typer.Option(1.0, "--jail-cpus", help="CPU quota of one session, in CPUs (cgroup cpu.cfs_quota_us / cpu.max).")


def jail_limits(memory: str, pids: int, cpu: int, tmpfs: str, output: str, capture: str, relay: int,
                cpus: float = 1.0):
    """The :class:`JailLimits` the flags describe (UserError naming a bad value)."""
    from veriscale.harness.jail.limits import JailLimits
    from veriscale.sizes import parse_size

    return JailLimits(memory_bytes=parse_size(memory), pids=pids, cpu_s=cpu, tmpfs_bytes=parse_size(tmpfs),
                      output_bytes=parse_size(output), capture_bytes=parse_size(capture), relay_connections=relay,
                      cpus=cpus)


def register(sub_app: typer.Typer) -> None:
    """Add ``jail-run`` to the ``harness`` sub-app."""

    @sub_app.command("jail-run")
    def jail_run_command(
        task_dir: Path = typer.Argument(..., help="Materialised task folder."),
        command: List[str] = typer.Argument(..., help="The command and its arguments (after --)."),
        phase: str = typer.Option("resolve", "--phase", help="resolve, challenge, adjudicate or deliver (or resolver, falsify, adjudication, repair, ...)."),
        run_id: str = typer.Option("jail-run", "--run-id", help="Run whose session folder becomes the writable output folder."),
        runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", help="Runs live in RUNS_DIR/<task>/<run-id> instead of <task>.runs/<run-id>."),
        skills: Optional[List[Path]] = typer.Option(None, "--skills", help="Extra skills folders, as for harness run."),
        timeout: float = typer.Option(120.0, "--timeout", help="Wall-clock seconds before the command is killed."),
        endpoint: Optional[str] = typer.Option(None, "--model-endpoint", help="HOST:PORT of a model server to forward into the jail."),
        no_jail: bool = typer.Option(False, "--no-jail", help="Run unconfined, for comparison."),
        memory: str = MEMORY, pids: int = PIDS, cpu: int = CPU, tmpfs: str = TMPFS, output: str = OUTPUT,
        capture: str = CAPTURE, relay: int = RELAY, cpus: float = CPUS,
    ) -> None:
        """Run one command in exactly the jail a session of PHASE gets; its exit code is the command's.

        Example: veriscale harness jail-run tasks/t1 --phase challenge -- python3 -c 'import os; print(os.getuid())'
        """
        from veriscale.harness.jail.sandbox import JAIL_OFF_MESSAGE, JailSpec, run_jailed
        from veriscale.harness.protocol.layout import RunLayout
        from veriscale.harness.protocol.phases import protocol_phase
        from veriscale.harness.safe_fs import resolved
        from veriscale.harness.workspace.contract import TaskWorkspace

        with user_errors():
            limits = jail_limits(memory, pids, cpu, tmpfs, output, capture, relay, cpus)
            chosen = protocol_phase(phase)
            task = TaskWorkspace.open(resolved(task_dir, "task folder"))
            layout = RunLayout.for_task(task.path, run_id, runs_dir)
            visible = [p for p in layout.visible_dirs(chosen, [resolved(p, "skills folder") for p in skills or []]) if p.exists()]
            spec = JailSpec(task_dir=task.path, writable_dir=layout.session_dir(chosen), readonly_extra=visible,
                            model_endpoint=_endpoint(endpoint), no_jail=no_jail, limits=limits)
            result = run_jailed(spec, list(command), timeout_s=timeout)
        if no_jail:  # a warning: said even under --quiet
            err_console.print(for_terminal(cli_text(JAIL_OFF_MESSAGE)), highlight=False, soft_wrap=True)
        else:
            info(for_terminal(result.limits_line), highlight=False, soft_wrap=True)
        # the command's own output is passed through as it came, like any command run in a terminal
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        if result.limit:
            err_console.print(f"jail: stopped by the {result.limit} limit", highlight=False)
        raise typer.Exit(result.returncode)


def _endpoint(text: Optional[str]):
    if text is None:
        return None
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        from veriscale.errors import UserError

        raise UserError(f"--model-endpoint '{text}' is not HOST:PORT: give e.g. 127.0.0.1:8000")
    return host.strip("[]"), int(port)
