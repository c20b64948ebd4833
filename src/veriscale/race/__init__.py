"""``veriscale race``: run one agent N times in isolated git worktrees, select the best, apply it.

    from veriscale.race import find_repo, run_race, to_candidates, refusal, apply_patch

    repo = find_repo(Path.cwd())                                   # the repo and its HEAD
    runs = run_race(repo, ["sh", "-c", "./agent"], n=3, timeout_s=1800, task_file=Path("task.md"))
    candidates, notes = to_candidates(runs, trajectory=None)       # run-0, run-1, run-2
    ...                                                            # select as `veriscale select` does
    if refusal(repo.root, runs[best].diff) is None:
        apply_patch(repo.root, runs[best].diff)

One concept per module: ``worktrees`` (detached worktrees in a temp folder, diffs),
``runner`` (processes, timeouts, cleanup), ``interrupts`` (Ctrl-C and SIGTERM during cleanup),
``candidates`` (runs as selection candidates), ``apply`` (the safe apply to the user's tree).
"""

from veriscale.race.apply import apply_patch, refusal, uncommitted_paths
from veriscale.race.run_candidates import to_candidates
from veriscale.race.agent_runs import RunResult, run_race
from veriscale.race.worktrees import Diff, DiffStats, Repo, Worktrees, capture_diff, find_repo

__all__ = ["Diff", "DiffStats", "Repo", "RunResult", "Worktrees", "apply_patch", "capture_diff", "find_repo",
           "refusal", "run_race", "to_candidates", "uncommitted_paths"]
