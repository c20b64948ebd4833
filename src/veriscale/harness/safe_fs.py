"""Host-side reads of folders a session wrote, without following anything it planted.

Every path is opened one component at a time below a trusted root with ``O_NOFOLLOW``
(``openat`` from the root's descriptor), so a link anywhere on the way, a FIFO, a device file
or an oversized file is refused instead of followed, waited on or read whole::

    text = read_text_beneath(run_dir, "sessions/resolve/ledger.json", max_bytes=1 << 20)
    for rel, size in walk_regular_files(out_dir):      # links, FIFOs, devices are skipped
        ...

Walks are iterative and hold one folder descriptor at a time, so a tree thousands of levels
deep neither exhausts the stack nor the descriptor table. The writers that take the same care
are :mod:`veriscale.harness.safe_write`; the one name filter is :mod:`veriscale.harness.safe_names`.

Errors are :class:`UnsafePath` (a ``ValueError``) with one sentence about the entry itself,
never about what a link points at, so a message cannot tell a session whether some other host
path exists.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

DEFAULT_MAX_READ_BYTES = 64 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class UnsafePath(ValueError):
    """A path below a trusted root is a link, a special file, too large, or missing."""


def _parts(rel: str | os.PathLike[str]) -> list[str]:
    parts = [p for p in PurePosixPath(os.fspath(rel)).parts if p not in ("", ".")]
    if any(p == ".." or p.startswith("/") for p in parts):
        raise UnsafePath(f"'{rel}' leaves its folder: use a path without '..'")
    return parts


def _descend(root: Path, parts: list[str], *, create: bool = False, shown: str | None = None) -> int:
    """A descriptor of folder ``root/parts``, one component at a time, links refused.

    Reading (``create=False``): any component that is not a real folder is ``UnsafePath``
    naming ``shown``. Creating: a missing folder is made (0755); a link or a file on the way is
    ``UnsafePath``; other errors (no permission, a name too long) stay ``OSError``.
    ``root`` itself is opened as given: a missing root is the caller's ``OSError``.
    """
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            child = _child_dir(fd, part, create=create, shown=shown)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _child_dir(fd: int, part: str, *, create: bool, shown: str | None) -> int:
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError as exc:
        if not create:
            raise UnsafePath(f"'{shown}' is not a plain folder (a link, a file or missing): {exc.strerror}") from None
    except OSError as exc:
        if not create:
            raise UnsafePath(f"'{shown}' is not a plain folder (a link, a file or missing): {exc.strerror}") from None
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(f"'{part}' is a link or a file, not a plain folder") from None
        raise
    try:
        os.mkdir(part, 0o755, dir_fd=fd)
    except FileExistsError:
        pass  # made meanwhile; the open below checks what it is
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        raise UnsafePath(f"'{part}' is not a plain folder ({exc.strerror})") from None


def open_dir_beneath(root: Path, rel: str | os.PathLike[str] = "") -> int:
    """A descriptor of folder ``root/rel``; every component after ``root`` must be a real folder."""
    return _descend(root, _parts(rel), shown=str(rel))


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


def resolved(path: Path | str, what: str = "path") -> Path:
    """``path`` with every link followed (``Path.resolve``), or a ``UserError`` in one sentence.

    A symlink loop (``a -> b``, ``b -> a``; ``loop -> loop``) makes ``Path.resolve`` raise
    ``RuntimeError`` on Python 3.11/3.12 (an ``OSError`` elsewhere): here it is a sentence naming
    ``what`` and the path, and the fix::

        real = resolved(dest, "destination")   # UserError: destination 'x' is a symlink loop ...
    """
    from veriscale.errors import UserError

    try:
        return Path(path).resolve()
    except RuntimeError:  # "Symlink loop from ..." (Python 3.11, 3.12)
        raise UserError(f"{what} '{path}' is a symlink loop (a link that leads back to itself): "
                        "remove or replace that link, or give another path") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"{what} '{path}' is a symlink loop (a link that leads back to itself): "
                            "remove or replace that link, or give another path") from None
        raise UserError(f"{what} '{path}' cannot be resolved ({exc.strerror}): check the path") from None


def is_link_loop(path: Path | str) -> bool:
    """Whether following ``path`` never ends (a symlink loop); False for a missing or plain path."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


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
