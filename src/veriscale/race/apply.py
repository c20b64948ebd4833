"""Apply the winner's diff to the user's working tree, never over their uncommitted changes.

    reason = refusal(repo.root, diff)      # None, or one sentence why it must not be applied
    if reason is None:
        apply_patch(repo.root, diff)       # git apply: working tree only, all hunks or none

A diff is refused when ``git apply --check`` says it does not apply to the working tree, or
when it touches a path the user has uncommitted changes in (staged, unstaged or untracked):
those files are the user's, even where the patch would apply cleanly.
"""

from __future__ import annotations

from pathlib import Path

from veriscale.errors import UserError
from veriscale.race.worktrees import Diff, git

APPLY = ("apply", "--binary", "--whitespace=nowarn")
MAX_NAMED = 3


def uncommitted_paths(root: Path) -> set[str]:
    """Every path ``git status`` reports in ``root``: staged, unstaged, untracked (renames: both names)."""
    out = git(["status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=none"], root).stdout
    tokens = out.split("\0")
    paths: set[str] = set()
    i = 0
    while i < len(tokens):
        entry = tokens[i]
        i += 1
        if len(entry) < 4:
            continue
        paths.add(entry[3:])
        if entry[0] in "RC" and i < len(tokens):  # the original name follows a rename or copy
            paths.add(tokens[i])
            i += 1
    return paths


def overlapping(diff_paths: tuple[str, ...] | list[str], user_paths: set[str]) -> list[str]:
    """The diff's paths that are, contain or lie inside a path the user has changed."""
    clash = []
    for path in diff_paths:
        if any(path == u or path.startswith(u.rstrip("/") + "/") or u.startswith(path + "/") for u in user_paths):
            clash.append(path)
    return sorted(clash)


def refusal(root: Path, diff: Diff, who: str = "the winner") -> str | None:
    """Why ``diff`` must not be applied to the working tree at ``root``; None when it may."""
    clash = overlapping(diff.paths, uncommitted_paths(root))
    if clash:
        named = ", ".join(clash[:MAX_NAMED]) + (f" and {len(clash) - MAX_NAMED} more" if len(clash) > MAX_NAMED else "")
        return (f"{who}'s diff touches {named}, where you have uncommitted changes: not applied, so your changes "
                "stay as they are (commit or stash them, then apply the diff)")
    check = git([*APPLY, "--check", "-"], root, input=diff.patch, check=False)
    if check.returncode != 0:
        lines = [line for line in check.stderr.strip().splitlines() if line.strip()]
        why = lines[-1].removeprefix("error: ") if lines else f"git apply exit {check.returncode}"
        return f"{who}'s diff does not apply to your working tree ({why}): not applied, nothing was changed"
    return None


def apply_patch(root: Path, diff: Diff) -> None:
    """``git apply`` the patch to the working tree at ``root`` (atomic: every hunk or none)."""
    done = git([*APPLY, "-"], root, input=diff.patch, check=False)
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        raise UserError(f"git apply failed ({lines[-1] if lines else done.returncode}): nothing was changed")
