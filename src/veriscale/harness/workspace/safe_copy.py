"""Copy files and unpack zip rollouts without letting a name or link escape its folder.

Rejected with a ``UserError`` (one sentence naming the offending entry):

- names that are absolute, carry a drive letter, a NUL, or a ``..`` component split on ``/``
  or ``\\`` (zip-slip style: ``../../etc/passwd``, ``..\\evil.txt``);
- symlinks whose target resolves outside the source root;
- zip members that are symlinks, or archives that unpack past ``max_bytes`` (counted while
  unpacking, whatever the headers declare) or hold more entries than the ``zip_limits`` cap.

Symlinks that stay inside the root are copied as the files they point to; a symlink loop
(``a -> b``, ``b -> a``) or a link back to a folder that holds it (``loop -> .``) is left out and
reported (``left_out``), never followed::

    copy_tree(src / "inputs", dest / "workspace", root=src, skip=lambda rel: None)
    extract_zip(src / "rollouts" / "run-3.zip", dest / "tmp", max_bytes=1 << 30)
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import zipfile
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator

from veriscale.errors import UserError
from veriscale.harness.safe_fs import is_link_loop, is_within, resolved
from veriscale.harness.workspace.zip_limits import ZIP_ERRORS, ArchiveRefused, Inflation, ZipLimits

DEFAULT_MAX_EXTRACT_BYTES = 1 << 30
#: The deepest folder :func:`copy_tree` copies; real deliverables nest a handful of levels.
MAX_COPY_DEPTH = 256

#: A write that failed for want of space (or quota): the caller names the destination and the size.
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)

# skip(relative POSIX path, is_dir) -> reason to leave the entry out, or None to copy it
SkipRule = Callable[[str, bool], "str | None"]


def check_name(name: str, where: str) -> None:
    """Raise ``UserError`` when ``name`` could address a path outside its folder."""
    parts = re.split(r"[\\/]", name)
    bad = (
        "\x00" in name
        or name.startswith(("/", "\\"))
        or re.match(r"^[A-Za-z]:", name) is not None
        or ".." in parts
    )
    if bad:
        raise UserError(
            f"unsafe file name {name!r} in {where}: names must stay inside their folder "
            "(no '..', no absolute paths); rename or remove that entry"
        )



def ensure_inside(path: Path, root: Path) -> None:
    """Raise ``UserError`` when ``path`` (after following links) lies outside ``root``."""
    target = resolved(path, "source path")
    if not is_within(target, resolved(root, "source folder")):
        raise UserError(
            f"'{path}' points outside the source folder ('{target}'): "
            "replace the link with the file itself or remove it"
        )


def copy_tree(
    src: Path,
    dest: Path,
    *,
    root: Path,
    skip: SkipRule,
    left_out: list[tuple[str, str]],
    rel_prefix: str = "",
) -> list[Path]:
    """Copy ``src`` into ``dest`` safely; return the copied destination files.

    ``skip`` decides per entry (relative to ``src``); skipped entries are appended to
    ``left_out`` as (``rel_prefix`` + relative path, reason).
    """
    ensure_inside(src, root)
    real_root = resolved(root, "source folder")
    copied: list[Path] = []
    visited: set[Path] = set()

    def entries(current: Path) -> Iterator[os.DirEntry[str]]:
        real = resolved(current)
        if real in visited:
            return iter(())
        visited.add(real)
        return iter(sorted(os.scandir(current), key=lambda e: e.name))

    dest.mkdir(parents=True, exist_ok=True)
    # iterative depth-first walk (pre-order, sorted): any depth, no recursion
    stack: list[tuple[Path, PurePosixPath, Iterator[os.DirEntry[str]]]] = [(src, PurePosixPath(), entries(src))]
    try:
        _copy_entries(stack, entries, dest, real_root, skip, left_out, rel_prefix, copied)
    except OSError as exc:  # e.g. a path past the system's length limit, thousands of folders deep
        if exc.errno in DISK_FULL_ERRNOS:
            raise  # the caller names the destination and the space it needs
        where = str(exc.filename or src)
        raise UserError(f"'{where[:200]}{'…' if len(where) > 200 else ''}' cannot be copied ({exc.strerror}): "
                        "flatten or shorten that folder") from None
    return copied


def _copy_entries(stack, entries, dest: Path, real_root: Path, skip: SkipRule, left_out: list[tuple[str, str]],
                  rel_prefix: str, copied: list[Path]) -> None:
    while stack:
        current, rel, pending = stack[-1]
        entry = next(pending, None)
        if entry is None:
            stack.pop()
            continue
        check_name(entry.name, f"'{current}'")
        entry_rel = rel / entry.name
        entry_path = Path(entry.path)
        if entry.is_symlink():
            if is_link_loop(entry_path):  # a -> b, b -> a: resolving it never ends
                left_out.append((rel_prefix + entry_rel.as_posix(),
                                 "symlink loop (a link that leads back to itself): not followed"))
                continue
            target = resolved(entry_path, "symlink")
            if target.is_dir() and (target == resolved(current) or target in resolved(current).parents):
                left_out.append((rel_prefix + entry_rel.as_posix() + "/",
                                 "symlink back to a folder that holds it (a loop): not followed"))
                continue
            if not is_within(target, real_root) or not target.exists():
                raise UserError(
                    f"symlink '{entry_path}' points outside the source folder ('{target}'): "
                    "replace it with the file itself or remove it"
                )
        is_dir = entry_path.is_dir()
        reason = skip(entry_rel.as_posix(), is_dir)
        if reason is not None:
            left_out.append((rel_prefix + entry_rel.as_posix() + ("/" if is_dir else ""), reason))
            continue
        if is_dir:
            if len(stack) >= MAX_COPY_DEPTH:
                raise UserError(f"'{rel_prefix}{str(entry_rel)[:120]}…' nests deeper than {MAX_COPY_DEPTH} folders: "
                                "flatten that folder")
            stack.append((entry_path, entry_rel, entries(entry_path)))
        elif entry_path.is_file():
            target_file = dest / entry_rel
            target_file.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(entry_path, target_file)
            copied.append(target_file)
        else:
            left_out.append((rel_prefix + entry_rel.as_posix(), "not a regular file"))


def extract_zip(archive: Path, dest: Path, *, max_bytes: int = DEFAULT_MAX_EXTRACT_BYTES,
                limits: ZipLimits | None = None) -> None:
    """Unpack ``archive`` into ``dest``, checking every member name, the entry count and the size."""
    try:
        zf = zipfile.ZipFile(archive)  # callers check that ``archive`` itself is inside the source
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"rollout archive '{archive}' is not a readable zip file ({exc}): replace it") from exc
    limits = replace(limits or ZipLimits.from_env(), file_bytes=max_bytes)
    inflation = Inflation(f"rollout archive '{archive}'", limits, member_cap=max_bytes)
    with zf:
        members = inflation.check_count(zf)
        for info in members:
            check_name(info.filename, f"zip '{archive}'")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise UserError(
                    f"zip '{archive}' holds a symlink member {info.filename!r}: "
                    "store the file itself in the archive"
                )
        total = sum(info.file_size for info in members)
        if total > max_bytes:
            raise UserError(
                f"zip '{archive}' unpacks to {total} bytes, over the {max_bytes}-byte cap: "
                "unpack it yourself or raise the cap"
            )
        real_dest = resolved(dest, "unpack folder")
        for info in members:
            target = resolved(dest / info.filename, "zip member")
            if not is_within(target, real_dest):  # belt and braces after check_name
                raise UserError(f"zip member {info.filename!r} in '{archive}' escapes its folder: remove it")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with open(target, "wb") as out:
                    for chunk in inflation.chunks(zf, info):
                        out.write(chunk)
            except ArchiveRefused as exc:
                if exc.cap not in ("member_bytes", "file_bytes"):
                    raise
                raise UserError(  # a header that lied about its size: counted, not trusted
                    f"zip '{archive}' unpacks past the {max_bytes}-byte cap "
                    f"(member {info.filename!r}): unpack it yourself or raise the cap") from exc
            except ZIP_ERRORS as exc:
                raise UserError(f"zip '{archive}' member {info.filename!r} cannot be unpacked "
                                f"({type(exc).__name__}: {exc}): replace the archive") from None
