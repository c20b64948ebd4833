"""Host-side reads of folders a session wrote, without following anything it planted.

Every path is opened one component at a time below a trusted root with ``O_NOFOLLOW``
(``openat`` from the root's descriptor), so a link anywhere on the way, a FIFO, a device file
or an oversized file is refused instead of followed, waited on or read whole::

    text = read_text_beneath(run_dir, "sessions/resolve/ledger.json", max_bytes=1 << 20)
    for rel, size in walk_regular_files(out_dir):      # links, FIFOs, devices are skipped
        ...
    copy_plain_tree(src, dest)                          # regular files and folders only

Errors are :class:`UnsafePath` (a ``ValueError``) with one sentence about the entry itself,
never about what a link points at, so a message cannot tell a session whether some other host
path exists.
"""

from __future__ import annotations

import errno
import os
import shutil
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
    """Every entry below ``root/rel`` as ``(path relative to root, lstat)``, sorted, links never entered."""
    start = PurePosixPath(*_parts(rel)) if _parts(rel) else PurePosixPath()
    fd = open_dir_beneath(root, start)
    try:
        yield from _walk_fd(fd, start)
    finally:
        os.close(fd)


def _walk_fd(fd: int, rel: PurePosixPath) -> Iterator[tuple[PurePosixPath, os.stat_result]]:
    for name in sorted(os.listdir(fd)):
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        yield rel / name, info
        if stat.S_ISDIR(info.st_mode):
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # replaced by a link or removed since the listing
            try:
                yield from _walk_fd(child, rel / name)
            finally:
                os.close(child)


def walk_regular_files(root: Path, rel: str | os.PathLike[str] = "") -> Iterator[tuple[PurePosixPath, int]]:
    """``(path relative to root, size)`` of each regular file below ``root/rel``; nothing else."""
    for path, info in walk_entries(root, rel):
        if stat.S_ISREG(info.st_mode):
            yield path, info.st_size


def copy_plain_tree(src: Path, dest: Path, *, skip=lambda rel: False, max_bytes: int = DEFAULT_MAX_READ_BYTES) -> list[str]:
    """Copy regular files and folders of ``src`` into a fresh ``dest`` (modes 0644/0755); return what was left out.

    ``dest`` must not exist yet or be a real folder (never a link); links, FIFOs, devices and
    sockets in ``src`` are left out and listed as ``'rel (a link)'``.
    """
    left_out: list[str] = []
    make_plain_dir(dest)
    for rel, info in walk_entries(src):
        if skip(rel):
            continue
        target = dest.joinpath(*rel.parts)
        if stat.S_ISDIR(info.st_mode):
            make_plain_dir(target)
        elif stat.S_ISREG(info.st_mode):
            write_plain_file(target, read_bytes_beneath(src, rel, max_bytes=max_bytes))
        else:
            left_out.append(f"{rel.as_posix()} ({_kind(info.st_mode).removeprefix('a ')})")
    return left_out


def make_plain_dir(path: Path) -> None:
    """``mkdir -p`` that refuses to go through or end at a link."""
    path = Path(path)
    if os.path.islink(path):
        raise UnsafePath(f"'{path}' is a link, not a folder")
    if not path.exists():
        if not path.parent.exists():
            make_plain_dir(path.parent)
        path.mkdir(mode=0o755)
    elif not path.is_dir():
        raise UnsafePath(f"'{path}' is not a folder")


def write_plain_file(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to a new file at ``path`` (replacing a file, never writing through a link)."""
    tmp = path.with_name(f".{path.name}.veriscale-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)  # rename replaces a link itself, not its target


def remove_tree(path: Path) -> None:
    """Remove ``path`` (file, link or folder tree) without following any link inside it."""
    path = Path(path)
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)  # rmtree does not follow links below the top (fd-based on Linux)
