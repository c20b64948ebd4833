"""``veriscale harness run``: the verification protocol over materialised tasks, here or on Ray
(:mod:`veriscale.harness.protocol.protocol_runner`, :mod:`veriscale.many.ray_harness`).

    veriscale harness run tasks/finance --model http://127.0.0.1:8000/v1#qwen --contract pick-only
    veriscale harness run tasks/* --model http://10.0.0.7:8000/v1#qwen --executor ray --agent pi
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from veriscale.cli import harness_jail
from veriscale.cli.common import console, emit_json, err_console, info, quiet, user_errors
from veriscale.cli.flags import cli_text
from veriscale.shown_text import assembled, for_terminal


def add_run_command(sub_app: typer.Typer) -> None:
    """``veriscale harness run``: the protocol over one or more tasks (see veriscale.harness.protocol.protocol_runner)."""
    if any(getattr(c, "name", None) == "run" for c in sub_app.registered_commands):
        return

    @sub_app.command("run")
    def run_command(
        task_dirs: List[Path] = typer.Argument(..., help="Materialised task folders."),
        model: str = typer.Option(..., "--model", help="Model URI, e.g. http://127.0.0.1:8000/v1#qwen."),
        contract: str = typer.Option("artifact", "--contract", help="pick-only (deliver the chosen base) or artifact (evidence-backed revisions)."),
        concurrency: int = typer.Option(2, "--concurrency", help="Sessions (and tasks) that may run at once."),
        phase_timeout: float = typer.Option(900.0, "--phase-timeout", help="Wall-clock seconds per phase; commands are killed with their process group."),
        no_jail: bool = typer.Option(False, "--no-jail", help="Run sessions unconfined (every log line says so)."),
        max_steps: int = typer.Option(30, "--max-steps", help="Tool-calling steps per session."),
        max_tokens: int = typer.Option(200_000, "--max-tokens", help="Total tokens per session."),
        run_id: Optional[str] = typer.Option(None, "--run-id", help="Run folder name; reuse one to resume (finished phases are not rerun)."),
        runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", help="Keep runs in RUNS_DIR/<task>/<run-id> instead of <task>.runs/<run-id>."),
        skills: Optional[List[Path]] = typer.Option(None, "--skills", help="Skills folder (repeatable; default: the bundled skills)."),
        agent: Optional[str] = typer.Option(None, "--agent", help="The agent loop: builtin (tool-calling loop, default) or pi (npm @mariozechner/pi-coding-agent)."),
        executor: str = typer.Option("local", "--executor", help="Where tasks run: local (this process, default) or ray (one Ray task a task; pip install 'veriscale\\[ray]'). builtin and pi still name the agent (now --agent)."),
        address: Optional[str] = typer.Option(None, "--address", help="With --executor ray: the Ray cluster to join (HOST:PORT, ray://HOST:PORT or auto; default: a local Ray instance)."),
        as_json: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
        memory: str = harness_jail.MEMORY, pids: int = harness_jail.PIDS, cpu: int = harness_jail.CPU,
        tmpfs: str = harness_jail.TMPFS, output: str = harness_jail.OUTPUT, capture: str = harness_jail.CAPTURE,
        relay: int = harness_jail.RELAY, cpus: float = harness_jail.CPUS,
    ) -> None:
        """Verify tasks: resolve and challenge in parallel, adjudicate, deliver; outcomes in <task>.runs/<run-id>/.

        Example: veriscale harness run tasks/finance --model http://127.0.0.1:8000/v1#qwen --contract pick-only
        (on a Ray cluster: --executor ray --address 10.0.0.5:6379; the agent loop: --agent pi)
        """
        from veriscale.harness.protocol.protocol_runner import RunOptions, run_tasks

        with user_errors():
            agent, where = _agent_and_place(agent, executor, address)
            options = RunOptions(model_uri=model, contract=contract, concurrency=concurrency,
                                 phase_timeout_s=phase_timeout, no_jail=no_jail, max_steps=max_steps,
                                 max_tokens=max_tokens, run_id=run_id, runs_root=runs_dir,
                                 skills_dirs=skills if skills else None, executor=agent,
                                 jail_limits=harness_jail.jail_limits(memory, pids, cpu, tmpfs, output, capture, relay, cpus))
            if no_jail and quiet():  # the progress lines below carry it; --quiet drops them but never the warning
                from veriscale.harness.jail.sandbox import JAIL_OFF_MESSAGE

                err_console.print(assembled(("warning: ", "yellow"), cli_text(JAIL_OFF_MESSAGE)), highlight=False,
                                  soft_wrap=True)
            remote = None
            if where == "ray":
                from veriscale.many.ray_harness import RayTasks

                remote = RayTasks(address=address)
            summary = run_tasks(task_dirs, options, remote=remote,
                                log=lambda line: info(for_terminal(cli_text(line)), highlight=False, soft_wrap=True))
        if as_json:
            emit_json(summary, "harness-run")
        else:
            table = Table(title=for_terminal(f"run {summary['run_id']} ({summary['contract']}, jail {summary['jail']})"))
            for column in ("task", "outcome", "base", "revisions", "calls", "tokens", "wall s", "run folder"):
                table.add_column(column)
            for task in summary["tasks"]:
                cost = task.get("cost") or {}
                tokens = cost.get("prompt_tokens", 0) + cost.get("completion_tokens", 0)
                outcome = task["outcome"] if task["outcome"] != "error" else f"error: {task['error']}"
                table.add_row(*(for_terminal(cell) for cell in (
                    task["task"], outcome, task.get("base"), task.get("revisions", ""), cost.get("calls", ""),
                    tokens, cost.get("wall_s", ""), task.get("run_dir", ""))))
            console.print(table)
        if summary["failed"]:
            raise typer.Exit(1)


#: ``--executor`` values that name the agent loop (before ``--agent``, ``harness run --executor pi`` chose it)
_OLD_AGENT_NAMES = ("builtin", "pi")


def _agent_and_place(agent: Optional[str], executor: str, address: Optional[str]) -> tuple[str, str]:
    """``harness run``'s agent loop (builtin or pi) and where its tasks run (local or ray)."""
    from veriscale.cli.common import note
    from veriscale.errors import UserError

    if executor in _OLD_AGENT_NAMES:
        if agent is not None and agent != executor:
            raise UserError(f"--executor {executor} and --agent {agent} name two agent loops: --executor says where "
                            "tasks run (local or ray), --agent which loop runs them; drop one")
        note(f"--executor {executor} names the agent loop, which is now --agent {executor}; --executor says where "
             "tasks run (local or ray)")
        agent, executor = executor, "local"
    if executor not in ("local", "ray"):
        raise UserError(f"--executor {executor!r} is unknown: use local or ray (the agent loop is --agent builtin or pi)")
    if address is not None and executor != "ray":
        raise UserError("--address names a Ray cluster: add --executor ray, or drop --address")
    agent = agent or "builtin"
    if agent not in _OLD_AGENT_NAMES:
        raise UserError(f"--agent {agent!r} is unknown: use builtin or pi")
    return agent, executor
