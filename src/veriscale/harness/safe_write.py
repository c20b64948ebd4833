"""Host-side writes and removals below a trusted root that no planted link can redirect.

    write_beneath(out_dir, "notes/a.md", b"text")   # no link on the way, a short temp name
    copy_plain_tree(src, dest)                     # regular files and folders only, streamed
    remove_tree(run_dir / "scratch")               # links removed, never entered

Writers refuse a link (or a file) anywhere below their root and create through a fixed-length
temporary name, so any name the file system takes can be written; removal is iterative and
holds one folder descriptor at a time. Reads are :mod:`veriscale.harness.safe_fs`.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from pathlib import Path

from veriscale.harness.safe_fs import (
    _DIR_FLAGS,
    DEFAULT_MAX_READ_BYTES,
    UnsafePath,
    _descend,
    _kind,
    _parts,
    _up,
    open_regular_beneath,
    walk_entries,
)
from veriscale.harness.safe_names import shown_name

#: Temporary names of writers: fixed length, whatever the length of the final name.
TMP_PREFIX = ".vs-tmp-"


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
                with os.fdopen(open_regular_beneath(src, rel, max_bytes=max_bytes), "rb", buffering=0) as source:
                    write_stream_beneath(dest, rel, source, max_bytes=max_bytes)
            else:
                left_out.append(f"{shown_name(rel.as_posix())} ({_kind(info.st_mode).removeprefix('a ')})")
        except UnsafePath as exc:
            left_out.append(f"{shown_name(rel.as_posix())} ({exc})")
        except OSError as exc:
            left_out.append(f"{shown_name(rel.as_posix())} (cannot be written here: {exc.strerror})")
    return left_out


def make_dirs_beneath(root: Path, rel: str | os.PathLike[str]) -> None:
    """``mkdir -p root/rel`` (mode 0755) that refuses a link or a file at any component below ``root``."""
    os.close(_descend(Path(root), _parts(rel), create=True))


def write_beneath(root: Path, rel: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` as the new regular file ``root/rel``, making folders on the way.

    A link or a file at any folder component below ``root`` is refused (``UnsafePath``); the
    data goes to a new file with a fixed-length name (``O_EXCL``, never an existing inode, never
    through a link), which is then renamed over ``rel``: an old file or link there is replaced,
    its target never touched. ``OSError`` (e.g. a name this file system cannot hold) leaves
    nothing behind.
    """
    _write_new(root, rel, mode, lambda fd: _write_all(fd, data))


#: Bytes a streaming writer holds at once.
STREAM_CHUNK_BYTES = 1 << 20
_ZEROS = bytes(STREAM_CHUNK_BYTES)


def write_stream_beneath(root: Path, rel: str | os.PathLike[str], source, mode: int = 0o644, *,
                         max_bytes: int | None = None, chunk_bytes: int = STREAM_CHUNK_BYTES) -> int:
    """Like :func:`write_beneath`, from ``source.read(n)`` in chunks of at most ``chunk_bytes``.

    The host never holds more than one chunk, and a chunk of zeros is not written but skipped
    (``lseek``): a sparse file a session handed back stays sparse on the host, whatever its
    apparent size (the file's length is set at the end with ``ftruncate``). Returns the bytes
    read; more than ``max_bytes`` is ``UnsafePath`` and leaves nothing behind.
    """
    chunk_bytes = min(chunk_bytes, STREAM_CHUNK_BYTES)
    total = 0

    def fill(fd: int) -> None:
        nonlocal total
        while chunk := source.read(chunk_bytes):
            total += len(chunk)
            if max_bytes is not None and total > max_bytes:
                raise UnsafePath(f"'{rel}' is over the {max_bytes}-byte limit for copying it")
            if memoryview(_ZEROS)[:len(chunk)] == chunk:
                os.lseek(fd, len(chunk), os.SEEK_CUR)  # a hole: nothing allocated
            else:
                _write_all(fd, chunk)
        os.ftruncate(fd, total)

    _write_new(root, rel, mode, fill)
    return total


def _write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_new(root: Path, rel: str | os.PathLike[str], mode: int, fill) -> None:
    parts = _parts(rel)
    if not parts:
        raise UnsafePath(f"'{rel}' names no file")
    parent = _descend(Path(root), parts[:-1], create=True)
    tmp = f"{TMP_PREFIX}{uuid.uuid4().hex}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
        try:
            try:
                fill(fd)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
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
