"""Detached git worktrees of one commit, in a temp folder outside the repo, always removed.

    repo = find_repo(Path.cwd())                    # Repo(root=..., head=<commit sha>)
    with Worktrees(repo, 3) as trees:               # trees.paths: [<tmp>/run-0, <tmp>/run-1, <tmp>/run-2]
        ...                                         # agents edit them
        diff = capture_diff(trees.paths[0], repo.head, exclude="trajectory.jsonl")
    # every worktree is removed, its git bookkeeping pruned and the temp folder deleted

The worktrees start from ``HEAD``: the user's uncommitted changes are not in them. They are
detached (no branch is made) and checked out with hooks off. ``capture_diff`` stages every
change inside its worktree (``git add -A``, the worktree's own index) and returns
``git diff --cached --binary`` against the commit, new untracked files included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from veriscale.errors import UserError
from veriscale.race.interrupts import interrupts_deferred

TEMP_PREFIX = "veriscale-race-"
# Variables that would point git (the agents' or ours) at another repo or index than the worktree's.
GIT_LOCATION_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX")
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


@dataclass(frozen=True)
class Repo:
    """The user's repository: its top folder and the commit ``HEAD`` names."""

    root: Path
    head: str


@dataclass(frozen=True)
class DiffStats:
    """What a diff touches: files, added and deleted lines (binary files count no lines)."""

    files: int = 0
    insertions: int = 0
    deletions: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"files": self.files, "insertions": self.insertions, "deletions": self.deletions}

    def __str__(self) -> str:
        return "no change" if not self.files else f"{self.files} file{'s' * (self.files != 1)} +{self.insertions} -{self.deletions}"


@dataclass(frozen=True)
class Diff:
    """One worktree's change against the base commit: the patch, the paths it touches, its stats."""

    patch: str = ""
    paths: tuple[str, ...] = ()
    stats: DiffStats = field(default_factory=DiffStats)

    @property
    def empty(self) -> bool:
        return not self.patch.strip()


def git(args: list[str], cwd: Path, *, input: str | None = None, clean_env: bool = False,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``git args`` in ``cwd``; ``clean_env`` drops variables pointing git elsewhere."""
    env = worktree_env() if clean_env else dict(os.environ)
    env["GIT_OPTIONAL_LOCKS"] = "0"  # status and diff do not rewrite the index behind the user
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, text=True,
                          encoding="utf-8", errors="surrogateescape", env=env, check=False)
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise UserError(f"git {args[0]} failed in '{cwd}': {detail[-1] if detail else f'exit {proc.returncode}'}")
    return proc


def worktree_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the variables that point git at another repo."""
    env = {k: v for k, v in os.environ.items() if k not in GIT_LOCATION_VARS}
    env.update(extra or {})
    return env


def find_repo(cwd: Path) -> Repo:
    """The git repo around ``cwd`` and its ``HEAD`` commit; a UserError when there is none."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise UserError("git is not installed or not on PATH: install git to race agents in worktrees") from None
    if top.returncode != 0 or not top.stdout.strip():
        raise UserError(f"'{cwd}' is not inside a git work tree: run veriscale race from the repo the agents should edit")
    root = Path(top.stdout.strip())
    head = git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], root, check=False)
    if head.returncode != 0:
        raise UserError(f"the repo '{root}' has no commit yet: commit once, since the worktrees start from HEAD")
    return Repo(root=root, head=head.stdout.strip())


class Worktrees:
    """``n`` detached worktrees of ``repo.head`` under one new temp folder; removed on exit.

    Leaving the ``with`` block (normally, by an error or by Ctrl-C) removes each worktree with
    ``git worktree remove --force``, prunes git's records of them and deletes the folder.
    """

    def __init__(self, repo: Repo, n: int, temp_root: str | Path | None = None) -> None:
        self.repo = repo
        self.n = n
        self.temp_root = temp_root
        self.folder: Path | None = None
        self.paths: list[Path] = []

    def __enter__(self) -> Worktrees:
        try:
            self.folder = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=self.temp_root))
            for i in range(self.n):
                path = self.folder / f"run-{i}"
                git([*NO_HOOKS, "worktree", "add", "--detach", "--quiet", str(path), self.repo.head], self.repo.root)
                self.paths.append(path)
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    @property
    def logs(self) -> Path:
        """A folder for transcripts beside the worktrees (never inside one, so no diff sees it)."""
        assert self.folder is not None
        path = self.folder / "logs"
        path.mkdir(exist_ok=True)
        return path

    def remove(self) -> None:
        """Remove every worktree made so far and the temp folder; safe to call twice. A Ctrl-C
        meanwhile waits until it is done."""
        with interrupts_deferred():
            for path in self.paths:
                git(["worktree", "remove", "--force", "--force", str(path)], self.repo.root, check=False)
            self.paths = []
            if self.folder is not None:
                shutil.rmtree(self.folder, ignore_errors=True)
                self.folder = None
            git(["worktree", "prune"], self.repo.root, check=False)


def capture_diff(worktree: Path, base: str, exclude: str | None = None) -> Diff:
    """Everything the agent changed in ``worktree`` against ``base``, new files included.

    ``exclude``: a path (relative to the worktree) left out, e.g. the trajectory file.
    """
    git(["add", "-A", "--", "."], worktree, clean_env=True)
    spec = ["--", "."] + ([f":(exclude,literal){exclude}"] if exclude else [])
    common = ["diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv", base]
    patch = git([*common[:-1], "--binary", "--full-index", "--src-prefix=a/", "--dst-prefix=b/", base, *spec],
                worktree, clean_env=True).stdout
    names = git([*common, "--no-renames", "--name-only", "-z", *spec], worktree, clean_env=True).stdout
    numstat = git([*common, "--no-renames", "--numstat", *spec], worktree, clean_env=True).stdout
    paths = tuple(p for p in names.split("\0") if p)
    insertions = deletions = 0
    for line in numstat.splitlines():
        added, deleted = (line.split("\t") + ["", ""])[:2]
        insertions += int(added) if added.isdigit() else 0
        deletions += int(deleted) if deleted.isdigit() else 0
    return Diff(patch=patch, paths=paths, stats=DiffStats(len(paths), insertions, deletions))
