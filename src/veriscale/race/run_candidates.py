"""Turn race runs into the candidates a selection judges.

    candidates, notes = to_candidates(runs, trajectory="traj.jsonl")
    candidates[1].id            # 'run-1'
    candidates[1].text          # its outcome, its diff and the tail of its stdout
    candidates[1].trajectory    # imported from traj.jsonl when the run wrote one veriscale reads,
                                # else one step built from its transcript (command, output, exit code)

A failed run (non-zero exit or timed out) stays a candidate, flagged in its text and its
``metadata`` (``exit_code``, ``timed_out``, ``failed``). Binary hunks are shown as one line.
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path

from veriscale.data.importers import load_candidates
from veriscale.data.model import Candidate, Step, Trajectory
from veriscale.errors import UserError
from veriscale.race.agent_runs import RunResult

STDOUT_LINES = 20
STDERR_LINES = 20
TAIL_CHARS = 4000


def to_candidates(runs: list[RunResult], trajectory: str | None = None) -> tuple[list[Candidate], list[str]]:
    """One candidate per run (``run-<i>``), and notes on trajectories that could not be used."""
    candidates, notes = [], []
    for run in runs:
        traj, why = _imported(run) if trajectory else (None, "")
        imported = traj is not None
        if trajectory and not imported:
            notes.append(f"{run.id}: {why} ({trajectory}); its transcript is judged instead")
        final = final_output(run)
        if traj is None:
            traj = transcript_trajectory(run)
        traj.final_output = final
        candidates.append(Candidate(
            id=run.id, text=final, trajectory=traj, source="",
            metadata={"exit_code": run.exit_code, "timed_out": run.timed_out, "failed": run.failed,
                      "wall_s": run.wall_s, "diff": run.diff.stats.to_dict(),
                      "trajectory": "imported" if imported else "transcript"}))
    return candidates, notes


def final_output(run: RunResult) -> str:
    """What the run produced: how it ended, its diff, the last lines it printed."""
    if run.timed_out:
        outcome = f"The agent run timed out after {run.wall_s:.0f}s and was killed."
    elif run.exit_code != 0:
        outcome = f"The agent run FAILED: exit code {run.exit_code}."
    else:
        outcome = "The agent run finished: exit code 0."
    parts = [outcome]
    if run.diff.empty:
        parts.append("It changed no file.")
    else:
        parts.append(f"Its changes ({run.diff.stats}):\n{readable_patch(run.diff.patch)}")
    tail = _tail_lines(run.stdout_tail, STDOUT_LINES)
    if tail:
        parts.append(f"Last lines of its output:\n{tail}")
    return "\n\n".join(parts)


def transcript_trajectory(run: RunResult) -> Trajectory:
    """One agent step: the command it ran, its output (stdout, then stderr) and exit code."""
    observation = _tail_lines(run.stdout_tail, STDOUT_LINES * 3)
    errors = _tail_lines(run.stderr_tail, STDERR_LINES)
    if errors:
        observation = f"{observation}\n[stderr]\n{errors}" if observation else f"[stderr]\n{errors}"
    step = Step(role="agent", tool_calls=[{"name": "shell", "arguments": {"command": shlex.join(run.command)}}],
                observation=observation, exit_code=None if run.timed_out else run.exit_code)
    return Trajectory(steps=[step])


def readable_patch(patch: str) -> str:
    """``patch`` with each ``GIT binary patch`` block replaced by one line."""
    out, skipping = [], False
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            skipping = False
        if skipping:
            continue
        if line == "GIT binary patch":
            out.append("[binary file change]")
            skipping = True
            continue
        out.append(line)
    return "\n".join(out)


def _imported(run: RunResult) -> tuple[Trajectory | None, str]:
    if run.trajectory_text is None:
        return None, "wrote no trajectory file"
    with tempfile.TemporaryDirectory(prefix="veriscale-race-trajectory-") as folder:
        path = Path(folder) / (run.trajectory_name or "trajectory.json")
        path.write_text(run.trajectory_text, encoding="utf-8")
        try:
            loaded = load_candidates([path])
        except UserError:
            return None, "its trajectory file is in no format veriscale reads"
    with_steps = [c for c in loaded if c.trajectory and c.trajectory.steps]
    if not with_steps:
        return None, "its trajectory file holds no steps"
    return Trajectory(steps=list(with_steps[-1].trajectory.steps)), ""


def _tail_lines(text: str, n: int) -> str:
    lines = text.rstrip().splitlines()[-n:]
    tail = "\n".join(lines)
    return tail[-TAIL_CHARS:]
