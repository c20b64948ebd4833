"""The dashboard's harness pages: one harness run read back from the store and its run folders.

For a ``harness run`` (or one ``harness task``) in the store, each task gets its claim map split
into consensus / disputed / omitted claims, both ledgers, the adjudication (base, reason,
revisions with the ledger entries they cite, ``finish.json``, ``repair.json``) and a unified
diff of every delivered file against the chosen base rollout's file::

    view = harness_view(Store.open(), 12, allowed_roots=(Path("/data/tasks"),))
    task = view["tasks"][0]
    task["claims"]["disputed"], task["ledgers"]["resolver"], task["diffs"][0]["diff"], task["problems"]

Run folders were written partly by jailed sessions, so one is read only when it lies below one of
``allowed_roots``, and only through :mod:`veriscale.harness.safe_fs` (no link followed, no FIFO
opened, sizes capped). A refused, missing or unparsable file empties its section and adds one
sentence to the task's ``problems``; nothing in a folder makes this raise.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from veriscale.engine.run_liveness import settle_dead_runs
from veriscale.engine.store import RunRecord, Store
from veriscale.harness.claims.claim_map import STATUSES, validate
from veriscale.harness.protocol.layout import DELIVERABLES_SUBDIR, RunLayout
from veriscale.harness.protocol.session_records import BASE_NONE, schema_message, schema_problems
from veriscale.harness.safe_fs import (
    UnsafePath,
    describe,
    open_dir_beneath,
    read_bytes_beneath,
    split_under,
    walk_entries,
)
from veriscale.harness.workspace.contract import DELIVERABLES_DIR, ROLLOUTS_DIR
from veriscale.harness.workspace.text_views import is_sidecar

HARNESS_COMMANDS = ("harness run", "harness task")
RECORDS = (("resolver", "resolve"), ("challenger", "challenge"), ("finish", "adjudicate"), ("repair", "deliver"))
MAX_DIFF_FILES = 500
#: Claim maps and records are host-checked JSON, larger than a typical deliverable.
MAX_JSON_BYTES = 16 << 20
#: What a task that has not ended shows instead of its run folder (recorded when it ends).
RUNNING_TASK = "this task is still running: its run folder is shown when it ends"
_LABEL = re.compile(r"^[A-Za-z0-9_-]+$")


class HarnessViewError(ValueError):
    """The run cannot be shown as a harness run (unknown id, another command)."""


def harness_view(store: Store, run_id: int, allowed_roots: tuple[Path, ...], *, max_file_bytes: int = 1 << 20,
                 max_diff_lines: int = 4000) -> dict[str, Any]:
    """JSON-ready view of a harness run (parent "harness run" id, or one "harness task" id).

    A diff's status is ``modified``, ``added``, ``removed``, ``unchanged``, ``binary`` (no text,
    ``changed`` says whether the bytes differ) or ``skipped`` (the file was refused; see ``note``).
    """
    settle_dead_runs(store)  # a task whose process died reads interrupted, not running
    run = store.run(run_id)
    if run is None:
        raise HarnessViewError(f"run {run_id} is not in the store '{store.path}': pick an id from `veriscale runs list`")
    if run.command not in HARNESS_COMMANDS:
        raise HarnessViewError(f"run {run_id} is a '{run.command}' run, not a harness run: open it on the runs page")
    roots = tuple(Path(root).resolve() for root in allowed_roots)
    if run.command == "harness task":
        entries: list[tuple[RunRecord | None, dict]] = [(run, run.result or {})]
    else:
        entries = [(c, c.result or {}) for c in store.child_runs(run.id) if c.command == "harness task"]
        entries = entries or [(None, t) for t in (run.result or {}).get("tasks", []) if isinstance(t, dict)]
    tasks = [_task_view(task_run, record, roots, max_file_bytes, max_diff_lines) for task_run, record in entries]
    return {"run_id": run.id, "command": run.command, "status": run.status, "model": run.model,
            "args": run.args, "created_at": run.created_at, "finished_at": run.finished_at, "tasks": tasks}


class _Folder:
    """A folder below an allowed root, read only with the no-follow readers; problems collected."""

    def __init__(self, root: Path, rel: PurePosixPath, problems: list[str], max_bytes: int) -> None:
        self.root, self.rel, self.path, self.problems, self.max_bytes = root, rel, root / rel, problems, max_bytes

    def absent(self, path: Path) -> bool:
        """True when nothing is at ``path``: a check before reading (it reads nothing, follows no link)."""
        try:
            os.lstat(path)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return False

    def rel_of(self, path: Path) -> PurePosixPath:
        return self.rel / path.relative_to(self.path).as_posix()

    def read(self, path: Path, what: str, max_bytes: int | None = None) -> bytes | None:
        try:
            return read_bytes_beneath(self.root, self.rel_of(path), max_bytes=max_bytes or self.max_bytes)
        except (UnsafePath, OSError) as exc:
            self.problems.append(f"{what} was not read: {exc}")
            return None

    def json(self, path: Path, what: str) -> Any | None:
        data = self.read(path, what, MAX_JSON_BYTES)
        if data is None:
            return None
        try:
            return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            self.problems.append(f"{what} '{self.rel_of(path)}' is not valid JSON ({exc})")
            return None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _place(path_text: Any, roots: tuple[Path, ...], what: str, problems: list[str],
           max_bytes: int) -> tuple[_Folder | None, str | None]:
    """The folder ``path_text`` names, when it lies below an allowed root and is a plain folder."""
    if not isinstance(path_text, str) or not Path(path_text).is_absolute():
        return None, f"no {what} was recorded for this task (it failed before it had one)"
    try:
        found = split_under(Path(path_text).resolve(), roots)
    except (OSError, RuntimeError):  # a link loop on the way
        found = None
    if found is None:
        return None, (f"{what} '{path_text}' is outside the folders this server may read: its operator can "
                      "add a folder that holds it with --allow-dir")
    folder = _Folder(found[0], found[1], problems, max_bytes)
    try:
        os.close(open_dir_beneath(folder.root, folder.rel))
    except UnsafePath:
        return None, f"{what} '{path_text}' is missing or not a plain folder: was it moved or deleted?"
    return folder, None


def _task_view(task_run: RunRecord | None, record: dict, roots: tuple[Path, ...], max_bytes: int,
               max_lines: int) -> dict[str, Any]:
    args = task_run.args if task_run else {}
    problems: list[str] = []
    view: dict[str, Any] = {
        "run_id": task_run.id if task_run else None,
        "task": record.get("task") or Path(str(args.get("task", "?"))).name,
        "outcome": record.get("outcome") or (task_run.status if task_run else "unknown"),
        "base": record.get("base"), "error": record.get("error"), "run_dir": record.get("run_dir"),
        "readable": False, "unreadable_reason": None,
        "claims": {status: [] for status in STATUSES}, "ledgers": {"resolver": None, "challenger": None},
        "adjudication": {"base": record.get("base"), "reason": None, "revisions": [], "unresolved": [],
                         "changes": [], "finish": None, "repair": None, "delivery": None},
        "diffs": [], "phases": record.get("phases") or {}, "cost": record.get("cost") or {}, "problems": problems,
    }
    run, reason = _place(view["run_dir"], roots, "run folder", problems, max_bytes)
    if run is None:
        still_running = task_run is not None and task_run.status == "running" and view["run_dir"] is None
        view["unreadable_reason"] = RUNNING_TASK if still_running else reason
        return view
    view["readable"] = True
    layout = RunLayout(run.path)
    view["claims"] = _claims(run.json(layout.claims_dir / "claims.json", "claim map"), problems)
    # A phase that failed or was skipped leaves no record: its absence is no problem to report.
    phases = view["phases"] if isinstance(view["phases"], dict) else {}
    unfinished = {phase for phase, info in phases.items() if _field(info, "status") != "completed"}

    def expected_absent(path: Path, phase: str) -> bool:
        return phase in unfinished and run.absent(path)
    docs = {}
    for kind, phase in RECORDS:
        path = layout.record(phase)
        doc = None if expected_absent(path, phase) else run.json(path, f"{kind} record")
        problems.extend(schema_problems(doc, kind) if doc is not None else [])
        docs[kind] = doc
    view["ledgers"] = {"resolver": docs["resolver"], "challenger": docs["challenger"]}
    report = (None if expected_absent(layout.delivery_report, "deliver")
              else run.json(layout.delivery_report, "delivery report"))
    view["adjudication"] = _adjudication(view["base"], docs, report)
    base = view["base"] or _field(docs["finish"], "base")
    if not expected_absent(layout.delivery_dir / DELIVERABLES_SUBDIR, "deliver"):
        view["diffs"] = _diffs(run, layout, base, _task_dir(args, run.path), roots, problems, max_lines)
    return view


def _field(doc: Any, key: str, default: Any = None) -> Any:
    return doc.get(key, default) if isinstance(doc, dict) else default


def _dicts(value: Any) -> list[dict]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _claims(doc: Any, problems: list[str]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {status: [] for status in STATUSES}
    if doc is None:
        return groups
    import jsonschema

    try:
        validate(doc, "claims")
    except jsonschema.ValidationError as exc:
        problems.append(f"claim map does not fit its schema ({schema_message(exc)}): its claims are not shown")
        return groups
    for claim in doc["claims"]:
        values = " | ".join(f"{c['display']} ({', '.join(c['rollouts'])})" for c in claim["candidates"])
        groups[claim["status"]].append({
            "id": claim["key"], "text": f"{claim['file']} · {claim['locator']} = {values}",
            "rollouts": sorted({r for c in claim["candidates"] for r in c["rollouts"]}), **claim})
    return groups


def _adjudication(base: Any, docs: dict[str, Any], delivery: Any) -> dict[str, Any]:
    cited = {f"{name}:{entry['id']}": entry for name in ("resolver", "challenger")
             for entry in _dicts(_field(docs[name], "entries")) if isinstance(entry.get("id"), str)}
    revisions = [{**rev, "evidence_entries": [{"ref": ref, "entry": cited.get(ref)}
                                              for ref in rev.get("evidence", []) if isinstance(ref, str)]
                  if isinstance(rev.get("evidence"), list) else []}
                 for rev in _dicts(_field(docs["finish"], "revisions"))]
    finish = docs["finish"]
    return {"base": base if base is not None else _field(finish, "base"), "reason": _field(finish, "reason"),
            "revisions": revisions, "unresolved": _field(finish, "unresolved", []),
            "changes": _dicts(_field(docs["repair"], "changes")), "finish": finish, "repair": docs["repair"],
            "delivery": delivery}


def _task_dir(args: dict, run_dir: Path) -> str | None:
    """The task folder: as the store recorded it, else beside ``<task>.runs/<run-id>``."""
    recorded = args.get("task")
    if isinstance(recorded, str) and Path(recorded).is_absolute():
        return recorded
    runs = run_dir.parent
    return str(runs.with_name(runs.name.removesuffix(".runs"))) if runs.name.endswith(".runs") else None


def _listing(folder: _Folder, path: Path, what: str) -> dict[str, PurePosixPath]:
    """Regular files below ``path`` (no sidecars) by relative path; anything else is a problem."""
    files: dict[str, PurePosixPath] = {}
    start = folder.rel_of(path)
    try:
        for rel, info in walk_entries(folder.root, start):
            name = rel.relative_to(start).as_posix()
            if stat.S_ISDIR(info.st_mode) or is_sidecar(Path(rel.name)):
                continue
            if not stat.S_ISREG(info.st_mode):
                folder.problems.append(f"{what} '{name}' is {describe(info.st_mode)}, not a regular file: not shown")
            elif len(files) >= MAX_DIFF_FILES:
                folder.problems.append(f"{what} has more than {MAX_DIFF_FILES} files: the rest are not shown")
                break
            else:
                files[name] = rel
    except (UnsafePath, OSError) as exc:
        folder.problems.append(f"{what} were not listed: {exc}")
    return files


def _diffs(run: _Folder, layout: RunLayout, base: Any, task_dir: str | None, roots: tuple[Path, ...],
           problems: list[str], max_lines: int) -> list[dict[str, Any]]:
    delivered = _listing(run, layout.delivery_dir / DELIVERABLES_SUBDIR, "delivered files")
    base_files: dict[str, PurePosixPath] = {}
    task = None
    if isinstance(base, str) and base != BASE_NONE:
        if not _LABEL.match(base):
            problems.append(f"base {base!r} is not a rollout label: its files are not compared")
            return []
        task, reason = _place(task_dir, roots, "task folder", problems, run.max_bytes)
        if task is None:
            problems.append(f"the base rollout's files were not compared: {reason}")
            return []
        base_files = _listing(task, task.path / ROLLOUTS_DIR / base / DELIVERABLES_DIR, f"base {base} files")
    diffs = []
    for name in sorted(set(delivered) | set(base_files)):
        try:
            old = _content(task, base_files.get(name), f"base file '{name}'")
            new = _content(run, delivered.get(name), f"delivered file '{name}'")
        except UnsafePath as exc:
            diffs.append({"path": name, "status": "skipped", "diff": "", "note": str(exc)})
            continue
        diffs.append(_diff(name, base, old, new, max_lines))
    return diffs


def _content(folder: _Folder | None, rel: PurePosixPath | None, what: str) -> bytes | None:
    """The file's bytes, None when it is not there; ``UnsafePath`` (noted in problems) when refused."""
    if folder is None or rel is None:
        return None
    try:
        return read_bytes_beneath(folder.root, rel, max_bytes=folder.max_bytes)
    except (UnsafePath, OSError) as exc:
        folder.problems.append(f"{what} was not read: {exc}")
        raise UnsafePath(f"{what} was not read") from None


def _text(data: bytes) -> list[str] | None:
    """The lines of a text file; None for binary (a NUL byte, or not UTF-8)."""
    try:
        return None if b"\0" in data else data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def _diff(name: str, base: Any, old: bytes | None, new: bytes | None, max_lines: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": name, "diff": ""}
    status = "added" if old is None else "removed" if new is None else "unchanged" if old == new else "modified"
    entry.update(status=status, changed=status != "unchanged")
    old_lines, new_lines = _text(old or b""), _text(new or b"")
    if old_lines is None or new_lines is None:
        return {**entry, "status": "binary"}
    lines = list(difflib.unified_diff(old_lines, new_lines, f"{base}/{name}" if old is not None else "/dev/null",
                                      f"delivered/{name}" if new is not None else "/dev/null", lineterm=""))
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"… {len(lines) - max_lines} more lines"]
    return {**entry, "diff": "\n".join(lines)}
