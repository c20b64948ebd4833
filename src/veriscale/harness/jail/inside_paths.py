"""Where a jailed session's host folders appear inside, and paths and strings translated both ways.

    views = Views.for_spec(spec)          # the task's parent is /session, so the task is /session/<its name>
    views.inside_path(spec.task_dir)      # "/session/t1"
    views.host_path("/session/t1/a.csv")  # Path("<host task folder>/a.csv")
    views.to_inside("cat /host/tasks/t1/a.csv"), views.to_host(output_read_back)

No host path is a mount point in the jail: the output folder is below the task (or at
``/session/.out``), each other read-only folder below one of those or at ``/session/.extra/<name>``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from veriscale.harness.safe_fs import is_within

if TYPE_CHECKING:
    from veriscale.harness.jail.spec import JailSpec

#: Neutral places of the session's folders inside: no host path is a mount point in the jail.
INSIDE_ROOT = "/session"
INSIDE_OUT = f"{INSIDE_ROOT}/.out"
INSIDE_EXTRA = f"{INSIDE_ROOT}/.extra"

_NAME_CHAR = r"[\w.~+@%-]"


class Views:
    """Where the session's host folders appear inside: the task's parent folder is ``/session``
    (only the task and what else is mounted show there), so the task is ``/session/<its name>``;
    the output folder below the task (or at ``/session/.out``); each other read-only folder below
    one of those or at ``/session/.extra/<name>``. Translates paths and strings that name them,
    both ways.

    A path inside a string is recognised whole: ``/a/task/x`` is translated, ``/a/task2`` and
    ``/b/a/task`` are not.
    """

    def __init__(self, pairs: Sequence[tuple[Path, str]]) -> None:
        self.pairs = sorted(((Path(h), i) for h, i in pairs), key=lambda p: len(str(p[0])), reverse=True)
        self._to_inside = self._pattern([str(h) for h, _ in self.pairs])
        self._to_host = self._pattern(sorted({i for _, i in self.pairs}, key=len, reverse=True))

    @staticmethod
    def _pattern(roots: list[str]) -> re.Pattern[str] | None:
        roots = [r for r in roots if r != "/"]
        if not roots:
            return None
        alternatives = "|".join(re.escape(r) for r in roots)
        return re.compile(rf"(?<![\w.~+@%/-])({alternatives})(?!{_NAME_CHAR})")

    @classmethod
    def for_spec(cls, spec: JailSpec) -> Views:
        task = spec.task_dir
        pairs: list[tuple[Path, str]] = [(task, f"{INSIDE_ROOT}/{task.name}")]
        if task.parent != task and task.parent != Path("/"):
            pairs.append((task.parent, INSIDE_ROOT))
        views = cls(pairs)
        if views.inside_path(spec.writable_dir) is None:
            pairs.append((spec.writable_dir, INSIDE_OUT))
        views = cls(pairs)
        taken: set[str] = set()
        for path in sorted(spec.readonly_extra, key=lambda p: len(p.parts)):
            if views.inside_path(path) is not None:
                continue
            name = re.sub(r"[^\w.-]", "_", path.name) or "root"
            candidate, n = name, 1
            while candidate in taken:
                n += 1
                candidate = f"{name}-{n}"
            taken.add(candidate)
            pairs.append((path, f"{INSIDE_EXTRA}/{candidate}"))
            views = cls(pairs)
        return views

    def inside_path(self, path: Path) -> str | None:
        """Where the host ``path`` appears inside, or None when it is below none of the folders."""
        for host, inside in self.pairs:
            if is_within(path, host):
                rel = path.relative_to(host)
                return inside if rel == Path(".") else f"{inside}/{rel.as_posix()}"
        return None

    def host_path(self, inside: str) -> Path | None:
        """The host path behind the inside path ``inside``, or None when no folder holds it."""
        for host, root in sorted(self.pairs, key=lambda p: len(p[1]), reverse=True):
            if inside == root or inside.startswith(root + "/"):
                return host / inside[len(root):].lstrip("/")
        return None

    def to_inside(self, text: str) -> str:
        """``text`` with each host folder's path replaced by its place inside."""
        if self._to_inside is None:
            return text
        table = {str(h): i for h, i in self.pairs}
        return self._to_inside.sub(lambda m: table[m.group(1)], text)

    def to_host(self, text: str) -> str:
        """``text`` with each inside place replaced by its host folder's path (for output read back)."""
        if self._to_host is None:
            return text
        table: dict[str, str] = {}
        for host, inside in self.pairs:
            table.setdefault(inside, str(host))
        return self._to_host.sub(lambda m: table[m.group(1)], text)
