"""The session tool ``grep``, run in a child process the session's deadline can kill.

RE2 is linear in the text, but its slow path (a DFA that keeps running out of cache, e.g.
``((a|b)*a(a|b){100}){10}c`` over one 2 MB line) still takes about a minute, inside one C call
that no deadline checked between files can stop (issue 30). So the host runs the walk and the
matching here, in ``python -m veriscale.harness.sessions.grep_worker``, reads the hits as they
come (one JSON string a line) and kills the child (SIGKILL) when the deadline passes, keeping
the hits it already had.

Request on stdin, one JSON object: ``{"pattern": str, "root": str, "rel": str, "max_matches": int}``.
Output: one JSON string per hit line, then ``"[stopped at N matches]"`` when the cap was reached.
The files are read as before: no link followed below ``root``, no file over ``MAX_READ_BYTES``.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path, PurePosixPath

import re2

from veriscale.harness.safe_fs import UnsafePath, lstat_beneath, read_text_beneath, walk_regular_files
from veriscale.harness.safe_names import shown_name

MAX_READ_BYTES = 64 << 20
LINE_SHOWN_CHARS = 300


def _files_under(root: Path, rel: PurePosixPath):
    mode = lstat_beneath(root, rel).st_mode
    if stat.S_ISREG(mode):
        yield rel
    elif stat.S_ISDIR(mode):
        for path, _ in walk_regular_files(root, rel):
            yield path


def grep(pattern: str, root: Path, rel: PurePosixPath, max_matches: int, emit) -> None:
    """Call ``emit(line)`` for each hit (``name:number:line``) under ``root/rel``, at most ``max_matches``."""
    options = re2.Options()
    options.log_errors = False
    regex = re2.compile(pattern, options=options)
    hits = 0
    for file in _files_under(root, rel):
        try:
            text = read_text_beneath(root, file, max_bytes=MAX_READ_BYTES)
        except (UnicodeDecodeError, UnsafePath, OSError):
            continue
        shown = shown_name(str(root.joinpath(*file.parts)))
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line):
                emit(f"{shown}:{number}:{line[:LINE_SHOWN_CHARS]}")
                hits += 1
                if hits >= max_matches:
                    emit(f"[stopped at {max_matches} matches]")
                    return


def main() -> int:
    request = json.loads(sys.stdin.readline())
    out = sys.stdout

    def emit(line: str) -> None:
        out.write(json.dumps(line) + "\n")
        out.flush()  # the host keeps what it read if the deadline kills this process

    grep(request["pattern"], Path(request["root"]), PurePosixPath(request["rel"]), int(request["max_matches"]), emit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
