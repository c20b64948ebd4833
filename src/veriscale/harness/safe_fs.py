"""Host-side reads of folders a session wrote, without following anything it planted.

Every path is opened one component at a time below a trusted root with ``O_NOFOLLOW``
(``openat`` from the root's descriptor), so a link anywhere on the way, a FIFO, a device file
or an oversized file is refused instead of followed, waited on or read whole::

    text = read_text_beneath(run_dir, "sessions/resolve/ledger.json", max_bytes=1 << 20)
    for rel, size in walk_regular_files(out_dir):      # links, FIFOs, devices are skipped
        ...
    copy_plain_tree(src, dest)                          # regular files and folders only
    write_beneath(out_dir, "notes/a.md", b"text")        # no link on the way, a short temp name

Walks and removals are iterative and hold one folder descriptor at a time, so a tree thousands
of levels deep neither exhausts the stack nor the descriptor table. Writers refuse a link (or a
file) anywhere below their root and create through a fixed-length temporary name, so any name
the file system takes can be written. :func:`name_problem` is the one name filter: control
characters (C0 and C1), bidirectional overrides and isolates, line separators, and bytes that
are not UTF-8 never become a host file name.

Errors are :class:`UnsafePath` (a ``ValueError``) with one sentence about the entry itself,
never about what a link points at, so a message cannot tell a session whether some other host
path exists.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

DEFAULT_MAX_READ_BYTES = 64 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


#: C0/C1 controls, DEL, bidi marks/embeddings/overrides/isolates, line and paragraph separators.
NAME_HAZARDS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_SURROGATES = re.compile("[\ud800-\udfff]")
#: Temporary names of writers: fixed length, whatever the length of the final name.
TMP_PREFIX = ".vs-tmp-"


class UnsafePath(ValueError):
    """A path below a trusted root is a link, a special file, too large, or missing."""


def name_problem(name: str) -> str | None:
    """Why ``name`` (one path or a component) may not become a host file name, or None.

    >>> name_problem("report\u202egnp.exe")
    'a control or bidirectional-formatting character (U+202E) in the name'
    """
    hazard = NAME_HAZARDS.search(name)
    if hazard is not None:
        return f"a control or bidirectional-formatting character (U+{ord(hazard.group()):04X}) in the name"
    if _SURROGATES.search(name):
        return "the name is not UTF-8"
    return None


def shown_name(name: str) -> str:
    """``name`` for a message or a tool reply: every hazard of :func:`name_problem` escaped."""
    escaped = NAME_HAZARDS.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                               else f"\\u{ord(m.group()):04x}", name)
    return _SURROGATES.sub(lambda m: f"\\x{ord(m.group()) - 0xdc00:02x}" if ord(m.group()) >= 0xdc80
                           else "\ufffd", escaped)


def _parts(rel: str | os.PathLike[str]) -> list[str]:
    parts = [p for p in PurePosixPath(os.fspath(rel)).parts if p not in ("", ".")]
    if any(p == ".." or p.startswith("/") for p in parts):
        raise UnsafePath(f"'{rel}' leaves its folder: use a path without '..'")
    return parts


def open_dir_beneath(root: Path, rel: str | os.PathLike[str] = "") -> int:
    """A descriptor of folder ``root/rel``; every component after ``root`` must be a real folder."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in _parts(rel):
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise UnsafePath(f"'{rel}' is not a plain folder (a link, a file or missing): {exc.strerror}") from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular_beneath(root: Path, rel: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_READ_BYTES) -> int:
    """A read descriptor of the regular file ``root/rel`` (no link on the way, no FIFO/device, size capped)."""
    parts = _parts(rel)
    if not parts:
        raise UnsafePath(f"'{rel}' names no file")
    parent = open_dir_beneath(root, PurePosixPath(*parts[:-1]) if len(parts) > 1 else "")
    try:
        try:
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePath(f"'{rel}' is a link, not a regular file") from None
            raise UnsafePath(f"'{rel}' cannot be opened as a regular file ({exc.strerror})") from None
    finally:
        os.close(parent)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnsafePath(f"'{rel}' is not a regular file ({_kind(info.st_mode)})")
    if info.st_size > max_bytes:
        os.close(fd)
        raise UnsafePath(f"'{rel}' is {info.st_size} bytes, over the {max_bytes}-byte limit for reading it")
    os.set_blocking(fd, True)
    return fd


def read_bytes_beneath(root: Path, rel: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_READ_BYTES) -> bytes:
    """The bytes of regular file ``root/rel``, read without following links (see module doc)."""
    fd = open_regular_beneath(root, rel, max_bytes=max_bytes)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafePath(f"'{rel}' grew past the {max_bytes}-byte limit while it was read")
    return data


def read_text_beneath(root: Path, rel: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_READ_BYTES) -> str:
    """:func:`read_bytes_beneath` decoded as UTF-8 (``UnicodeDecodeError`` for binary files)."""
    return read_bytes_beneath(root, rel, max_bytes=max_bytes).decode("utf-8")


def is_within(path: Path, root: Path) -> bool:
    """Whether ``path`` is ``root`` or below it, compared as written (resolve both first if links matter)."""
    return path == root or root in path.parents


def split_under(path: Path, roots: tuple[Path, ...]) -> tuple[Path, PurePosixPath] | None:
    """``(root, relative)`` for the first of ``roots`` that lexically holds ``path``; links are not resolved."""
    normal = Path(os.path.normpath(path))
    for root in roots:
        if is_within(normal, root):
            return root, PurePosixPath(normal.relative_to(root).as_posix())
    return None


def lstat_beneath(root: Path, rel: str | os.PathLike[str]) -> os.stat_result:
    """``lstat`` of ``root/rel`` with every folder on the way checked to be a real folder."""
    parts = _parts(rel)
    if not parts:
        return os.lstat(root)
    parent = open_dir_beneath(root, PurePosixPath(*parts[:-1]) if len(parts) > 1 else "")
    try:
        return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    except OSError as exc:
        raise UnsafePath(f"'{rel}' does not exist ({exc.strerror})") from None
    finally:
        os.close(parent)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "a special file"


def describe(mode: int) -> str:
    """``'a link'``, ``'a FIFO'``, ... for an ``st_mode`` (``'a regular file'`` for files)."""
    return "a regular file" if stat.S_ISREG(mode) else _kind(mode)


def walk_entries(root: Path, rel: str | os.PathLike[str] = "") -> Iterator[tuple[PurePosixPath, os.stat_result]]:
    """Every entry below ``root/rel`` as ``(path relative to root, lstat)``, sorted, links never entered.

    Depth-first and iterative: one folder descriptor is open at a time (a folder is left
    through ``..``, checked to be the folder it came from), so any depth works.
    """
    start = PurePosixPath(*_parts(rel)) if _parts(rel) else PurePosixPath()
    fd = open_dir_beneath(root, start)
    try:
        top = os.fstat(fd)
        # frames: (relative path, identity of the folder, names still to visit)
        stack = [(start, (top.st_dev, top.st_ino), iter(sorted(os.listdir(fd))))]
        while stack:
            here, ident, names = stack[-1]
            name = next(names, None)
            if name is None:
                stack.pop()
                if stack:
                    parent = _up(fd, stack[-1][1])
                    os.close(fd)
                    fd = parent
                continue
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed since the listing
            yield here / name, info
            if not stat.S_ISDIR(info.st_mode):
                continue
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # replaced by a link or removed since the listing
            seen = os.fstat(child)
            if (seen.st_dev, seen.st_ino) != (info.st_dev, info.st_ino):
                os.close(child)
                continue  # swapped since the lstat
            try:
                listing = iter(sorted(os.listdir(child)))
            except OSError:
                os.close(child)
                continue
            os.close(fd)
            fd = child
            stack.append((here / name, (seen.st_dev, seen.st_ino), listing))
    finally:
        os.close(fd)


def _up(fd: int, expected: tuple[int, int]) -> int:
    """A new descriptor of the parent of folder ``fd``, which must be the folder ``expected`` names."""
    parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
    seen = os.fstat(parent)
    if (seen.st_dev, seen.st_ino) != expected:
        os.close(parent)
        raise UnsafePath("a folder was moved while it was walked: walk it again")
    return parent


def walk_regular_files(root: Path, rel: str | os.PathLike[str] = "") -> Iterator[tuple[PurePosixPath, int]]:
    """``(path relative to root, size)`` of each regular file below ``root/rel``; nothing else."""
    for path, info in walk_entries(root, rel):
        if stat.S_ISREG(info.st_mode):
            yield path, info.st_size


def copy_plain_tree(src: Path, dest: Path, *, skip=lambda rel: False, max_bytes: int = DEFAULT_MAX_READ_BYTES) -> list[str]:
    """Copy regular files and folders of ``src`` into a fresh ``dest`` (modes 0644/0755); return what was left out.

    ``dest`` must not exist yet or be a real folder (never a link); links, FIFOs, devices and
    sockets in ``src`` are left out and listed as ``'rel (a link)'``, and so is an entry the
    host cannot create (``'rel (cannot be written here: File name too long)'``).
    """
    left_out: list[str] = []
    make_plain_dir(dest)
    for rel, info in walk_entries(src):
        if skip(rel):
            continue
        try:
            if stat.S_ISDIR(info.st_mode):
                make_dirs_beneath(dest, rel)
            elif stat.S_ISREG(info.st_mode):
                write_beneath(dest, rel, read_bytes_beneath(src, rel, max_bytes=max_bytes))
            else:
                left_out.append(f"{shown_name(rel.as_posix())} ({_kind(info.st_mode).removeprefix('a ')})")
        except UnsafePath as exc:
            left_out.append(f"{shown_name(rel.as_posix())} ({exc})")
        except OSError as exc:
            left_out.append(f"{shown_name(rel.as_posix())} (cannot be written here: {exc.strerror})")
    return left_out


def _dir_fd_beneath(root: Path, parts: list[str], *, create: bool) -> int:
    """A descriptor of ``root/parts``, making missing folders when ``create``; links refused."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise UnsafePath(f"'{part}' does not exist") from None
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile; the open below checks what it is
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise UnsafePath(f"'{part}' is not a plain folder ({exc.strerror})") from None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePath(f"'{part}' is a link or a file, not a plain folder") from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_dirs_beneath(root: Path, rel: str | os.PathLike[str]) -> None:
    """``mkdir -p root/rel`` (mode 0755) that refuses a link or a file at any component below ``root``."""
    os.close(_dir_fd_beneath(Path(root), _parts(rel), create=True))


def write_beneath(root: Path, rel: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` as the new regular file ``root/rel``, making folders on the way.

    A link or a file at any folder component below ``root`` is refused (``UnsafePath``); the
    data goes to a new file with a fixed-length name (``O_EXCL``, never an existing inode, never
    through a link), which is then renamed over ``rel``: an old file or link there is replaced,
    its target never touched. ``OSError`` (e.g. a name this file system cannot hold) leaves
    nothing behind.
    """
    parts = _parts(rel)
    if not parts:
        raise UnsafePath(f"'{rel}' names no file")
    parent = _dir_fd_beneath(Path(root), parts[:-1], create=True)
    tmp = f"{TMP_PREFIX}{uuid.uuid4().hex}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                os.fchmod(handle.fileno(), mode)
            os.rename(tmp, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)  # replaces a link itself
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=parent)
            except OSError:
                pass
            raise
    finally:
        os.close(parent)


def make_plain_dir(path: Path) -> None:
    """``mkdir -p`` that refuses to go through or end at a link (below the first existing real folder)."""
    path = Path(os.path.abspath(path))
    existing = path
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if os.path.islink(existing):
        raise UnsafePath(f"'{existing}' is a link, not a folder")
    if not os.path.isdir(existing):
        raise UnsafePath(f"'{existing}' is not a folder")
    make_dirs_beneath(existing, path.relative_to(existing).as_posix())


def write_plain_file(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to a new file at ``path`` (replacing a file, never writing through a link).

    The parent folder must be a real folder; prefer :func:`write_beneath` with a trusted root,
    which checks every folder below it.
    """
    path = Path(path)
    write_beneath(path.parent, path.name, data, mode)


def remove_tree(path: Path) -> None:
    """Remove ``path`` (file, link or folder tree) without following any link inside it; iterative."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(path)
        return
    parent = os.open(path.parent, _DIR_FLAGS)
    try:
        remove_beneath(parent, path.name)
    finally:
        os.close(parent)


def remove_beneath(parent_fd: int, name: str) -> None:
    """Remove entry ``name`` of the folder ``parent_fd`` and everything below it; links are removed, never entered."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            os.unlink(name, dir_fd=parent_fd)
            return
        raise
    top = os.fstat(parent_fd)
    # frames: (name in its parent, identity of its parent, folders still to remove below it)
    stack: list[tuple[str, tuple[int, int], list[str]]] = [(name, (top.st_dev, top.st_ino), _clear_files(fd))]
    try:
        while stack:
            here, parent_ident, subdirs = stack[-1]
            if subdirs:
                sub = subdirs.pop()
                try:
                    child = os.open(sub, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                        os.unlink(sub, dir_fd=fd)
                    elif exc.errno != errno.ENOENT:
                        raise
                    continue
                mine = os.fstat(fd)
                os.close(fd)
                fd = child
                stack.append((sub, (mine.st_dev, mine.st_ino), _clear_files(fd)))
                continue
            stack.pop()
            parent = _up(fd, parent_ident)
            os.close(fd)
            fd = parent
            os.rmdir(here, dir_fd=fd)
    finally:
        if fd != parent_fd:
            os.close(fd)


def _clear_files(fd: int) -> list[str]:
    """Unlink every entry of folder ``fd`` that is not a folder; return the folders' names."""
    folders = []
    for entry in os.listdir(fd):
        info = os.stat(entry, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            folders.append(entry)
        else:
            os.unlink(entry, dir_fd=fd)
    return folders
