"""Claim extraction in a child process with the text view's caps, and a budget of claims and bytes.

Reading a rollout's files is host work on files the host did not write: a 9 KB xlsx whose shared
strings expand one 4 MiB entity 99 times took 14 s, 2.9 GB and wrote an 830 MB claims.json, a
2 MiB csv of 220,000 columns ran past 600 s (issue 30). So each file is read here, in
``python -c`` (:func:`~veriscale.harness.workspace.capped_child.start_child`, as the text views), one JSON
request per stdin line, one JSON answer per stdout line:

- the host waits ``view_timeout_s`` for a file (and at most ``ROLLOUT_TIMEOUT_FILES`` times that
  for all of one rollout's files), then kills the child (SIGKILL) and starts a fresh one for the
  next file;
- the child caps its address space at what its readers use once loaded plus ``view_memory_mb``
  (``RLIMIT_AS``), so a reader that swells fails there; the host reads an answer no longer than
  the bytes the file may still add (:data:`ANSWER_SLACK` more);
- the child stops a file at :data:`~veriscale.harness.claims.extract.MAX_FILE_CLAIMS` claims, or
  when the rollout's claims or bytes of claim text run out, and says so in a warning.

A file cut short keeps its ``(file)`` claim and the claims sent before; the warning names the
file and the cap, and the run goes on with the next file::

    claims, warnings = extract_bounded({"r01": {"model.xlsx": Path(...)}}, ZipLimits.from_env())

csv files are read twice: once for a profile (header, columns unique in this version) from which
the key column is chosen over every rollout's version, once for their claims.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from veriscale.harness.claims.extract import (
    MAX_FILE_CLAIMS,
    MAX_ROLLOUT_CLAIM_BYTES,
    MAX_ROLLOUT_CLAIMS,
    OFFICE_SUFFIXES,
    ROLLOUT_TIMEOUT_FILES,
    TEXT_SUFFIXES,
    Claim,
    csv_claims,
    csv_profile,
    file_claims,
    key_column_of,
    read_csv,
)
from veriscale.harness.workspace.capped_child import READY, STARTUP_SECONDS, start_child, stop_child
from veriscale.harness.workspace.zip_limits import RAISE_IT, ArchiveRefused, ZipLimits, cap_text

#: bytes an answer may hold past the claim text the file may still add (warnings, a csv profile)
ANSWER_SLACK = 8 << 20
#: a csv profile (header names) larger than this is not sent: the file gets no key column
MAX_PROFILE_BYTES = 4 << 20
_SHOWN_ERROR_CHARS = 300
#: the files that can hold claims beyond their presence
CLAIM_SUFFIXES = OFFICE_SUFFIXES | TEXT_SUFFIXES | {".csv", ".json", ".pdf"}


# --- the child -----------------------------------------------------------------------------------


def _budget_note(what: str, taken: int, why: str) -> str:
    return f"claims from {what} stopped at {taken:,}: {why}, so the file's rest was not read"


def _take(what: str, claims: Iterator[Claim], max_claims: int, max_bytes: int) -> tuple[list[str], int, str | None]:
    """The JSON of each claim, within the budget; (parts, bytes, the warning when a budget stopped it)."""
    parts: list[str] = []
    used = 0
    limit = min(MAX_FILE_CLAIMS, max_claims)
    for claim in claims:
        if len(parts) >= limit:
            why = (f"at most {MAX_FILE_CLAIMS:,} claims are taken from one file" if limit == MAX_FILE_CLAIMS
                   else f"the rollout's budget of {MAX_ROLLOUT_CLAIMS:,} claims was spent")
            return parts, used, _budget_note(what, len(parts), why)
        part = json.dumps([claim.key, claim.kind, claim.file, claim.locator, claim.group, claim.value, claim.formula])
        if used + len(part) > max_bytes:
            why = f"the rollout's budget of {MAX_ROLLOUT_CLAIM_BYTES / (1 << 20):g} MiB of claim text was spent"
            return parts, used, _budget_note(what, len(parts), why)
        parts.append(part)
        used += len(part)
    return parts, used, None


def answer_for(request: dict[str, Any]) -> dict[str, Any]:
    """What the child answers for one file (see the module docstring); never raises but MemoryError."""
    rel, path, what = request["rel"], Path(request["path"]), request["what"]
    limits = ZipLimits(**request["limits"])
    answer: dict[str, Any] = {"claims": [], "bytes": 0, "warnings": [], "profile": None, "error": None}
    try:
        if request["phase"] == "profile":
            header, unique = csv_profile(*read_csv(path), max_columns=MAX_FILE_CLAIMS)  # a key among the first
            profile = {"header": header, "unique": sorted(unique)}
            if len(json.dumps(profile)) > MAX_PROFILE_BYTES:
                profile = {"header": [], "unique": []}
                answer["warnings"].append(f"{what}: its header is over {MAX_PROFILE_BYTES >> 20} MiB, so its rows "
                                          "are keyed by number")
            answer["profile"] = profile
            return answer
        if request["phase"] == "csv":
            header, rows = read_csv(path)
            claims = csv_claims(rel, header, rows, request["key_column"])
        else:
            claims = file_claims(rel, path, limits)
        parts, used, note = _take(what, claims, request["max_claims"], request["max_bytes"])
        answer["claims"], answer["bytes"] = parts, used
        if note:
            answer["warnings"].append(note)
    except MemoryError:
        raise
    except ArchiveRefused as exc:  # over an inflation cap, a DTD, a link: never opened
        answer["warnings"].append(f"{what} was not opened ({exc.reason}); only its presence is compared")
    except Exception as exc:  # noqa: BLE001 - a broken deliverable is a finding, not a crash
        detail = f"{type(exc).__name__}: {exc}"[:_SHOWN_ERROR_CHARS]
        answer["warnings"].append(f"{what} could not be read ({detail}); only its presence is compared")
    return answer


def serve() -> None:
    """The child's loop: one JSON request per stdin line, one JSON answer per stdout line."""
    from veriscale.harness.workspace.view_worker import _cap_memory

    for reader in ("openpyxl", "docx", "pypdf"):  # imported before the first deadline starts
        try:
            __import__(reader)
        except ImportError:
            pass
    out = sys.stdout.buffer
    out.write(READY + b"\n")
    out.flush()
    memory_capped = False
    for raw in sys.stdin.buffer:
        request = json.loads(raw)
        if not memory_capped:
            _cap_memory(int(request["limits"]["view_memory_bytes"]))
            memory_capped = True
        try:
            answer = answer_for(request)
            parts = answer.pop("claims")  # each already JSON: joined as is, not quoted again
            line = (b'{"claims": [' + ",".join(parts).encode() + b"], " + json.dumps(answer).encode()[1:])
        except MemoryError:
            line = b'{"error": "MemoryError"}'
        out.write(line + b"\n")
        out.flush()


# --- the host ------------------------------------------------------------------------------------


class _Failed(Exception):
    """The child did not answer for one file: ``cap`` is the cap it ran into."""

    def __init__(self, cap: str) -> None:
        super().__init__(cap)
        self.cap = cap


class ClaimsWorker:
    """The child that reads files for claims; ``ask`` sends one request and waits for its answer."""

    def __init__(self, limits: ZipLimits) -> None:
        self.limits = limits
        self._child: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "ClaimsWorker":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def ask(self, request: dict[str, Any], seconds: float, max_line: int) -> dict[str, Any]:
        """The child's answer to ``request`` within ``seconds``; ``_Failed`` on a timeout, crash or memory cap."""
        child = self._start()
        request = {**request, "limits": self.limits.as_dict()}
        try:
            assert child.stdin is not None
            child.stdin.write(json.dumps(request).encode() + b"\n")
            child.stdin.flush()
            line = self._read_line(child, time.monotonic() + seconds, max_line)
        except OSError:  # the child died (its memory cap): the pipe is gone
            line = b""
        if line is None:
            self.close()
            raise _Failed("time")
        try:
            answer: dict[str, Any] = json.loads(line)
        except ValueError:
            self.close()
            raise _Failed("memory") from None
        if answer.get("error"):
            self.close()  # a reader that ran out of memory leaves nothing behind for the next file
            raise _Failed("memory")
        return answer

    def close(self) -> None:
        """Stop the child (killed if it is still busy)."""
        child, self._child = self._child, None
        stop_child(child)

    def _start(self) -> subprocess.Popen[bytes]:
        if self._child is not None and self._child.poll() is None:
            return self._child
        self.close()
        # the deadline of a request starts once the child has imported its readers, not before
        self._child = start_child("veriscale.harness.claims.extract_worker", what="the claims process",
                                  ready=lambda child: self._read_line(child, time.monotonic() + STARTUP_SECONDS, 1 << 10) == READY)
        return self._child

    @staticmethod
    def _read_line(child: subprocess.Popen[bytes], deadline: float, max_line: int) -> bytes | None:
        """One answer line; ``None`` when the deadline passed first, ``b""`` when it ran past ``max_line``
        (the child is killed either way)."""
        assert child.stdout is not None
        fd = child.stdout.fileno()
        buffer = bytearray()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    child.kill()
                    return None
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return bytes(buffer)  # the child died mid-answer
                end = chunk.find(b"\n")
                buffer += chunk if end < 0 else chunk[:end]
                if len(buffer) > max_line:
                    child.kill()
                    return b""
                if end >= 0:
                    return bytes(buffer)


@dataclass
class _Rollout:
    """What one rollout has spent: claims, bytes of claim text and seconds."""

    label: str
    deadline: float
    claims: int = 0
    bytes: int = 0
    skipped: dict[str, list[str]] = field(default_factory=dict)  # why -> files not read for it


def _claim(part: list[Any]) -> Claim:
    key, kind, file, locator, group, value, formula = part
    return Claim(key, kind, file, locator, group, value, formula)


def _failure(what: str, cap: str, limits: ZipLimits, rollout_seconds: float, rollout_time: bool) -> str:
    if cap == "memory":
        why = f"reading it ran out of {cap_text('view_memory_bytes', limits)}; {RAISE_IT}"
    elif rollout_time:
        why = f"the rollout's {rollout_seconds:g} seconds for claims ({ROLLOUT_TIMEOUT_FILES} x " \
              f"{cap_text('view_seconds', limits)}) ran out while it was read"
    else:
        why = f"reading it took longer than {cap_text('view_seconds', limits)}; {RAISE_IT}"
    return f"{what} was not read for claims ({why}); only its presence is compared"


def extract_bounded(files_by_rollout: dict[str, dict[str, Path]], limits: ZipLimits,
                    ) -> tuple[dict[str, list[Claim]], list[str]]:
    """:func:`veriscale.harness.claims.extract.extract_claims`, each file read in the capped child."""
    warnings: list[str] = []
    claims: dict[str, list[Claim]] = {label: [] for label in files_by_rollout}
    rollout_seconds = ROLLOUT_TIMEOUT_FILES * limits.view_seconds
    spent: dict[str, _Rollout] = {}
    profiles: dict[str, dict[str, tuple[list[str], set[str]]]] = {}

    def ask(worker: ClaimsWorker, state: _Rollout, request: dict[str, Any]) -> dict[str, Any] | None:
        what = request["what"]
        left = state.deadline - time.monotonic()
        if left <= 0 or state.claims >= MAX_ROLLOUT_CLAIMS or state.bytes >= MAX_ROLLOUT_CLAIM_BYTES:
            why = (f"its {rollout_seconds:g} seconds for claims were spent" if left <= 0
                   else f"its budget of {MAX_ROLLOUT_CLAIMS:,} claims or {MAX_ROLLOUT_CLAIM_BYTES >> 20} MiB of "
                        "claim text was spent")
            state.skipped.setdefault(why, []).append(what)
            return None
        seconds = min(limits.view_seconds, left)
        max_bytes = MAX_ROLLOUT_CLAIM_BYTES - state.bytes
        try:
            answer = worker.ask({**request, "max_claims": MAX_ROLLOUT_CLAIMS - state.claims, "max_bytes": max_bytes},
                                seconds, max_bytes + ANSWER_SLACK)
        except _Failed as failed:
            warnings.append(_failure(what, failed.cap, limits, rollout_seconds, seconds < limits.view_seconds))
            return None
        parts = answer["claims"][: MAX_ROLLOUT_CLAIMS - state.claims]
        state.claims += len(parts)
        state.bytes += int(answer["bytes"])
        claims[state.label].extend(_claim(part) for part in parts)
        warnings.extend(str(w) for w in answer["warnings"])
        return answer

    with ClaimsWorker(limits) as worker:
        for label, files in sorted(files_by_rollout.items()):
            state = spent[label] = _Rollout(label, time.monotonic() + rollout_seconds)
            for rel, path in sorted(files.items()):
                claims[label].append(Claim(f"{rel}:(file)", "file", rel, "(file)", rel, "present"))
                request = {"rel": rel, "path": str(path), "what": f"{label}/{rel}"}
                suffix = path.suffix.lower()
                if suffix not in CLAIM_SUFFIXES:
                    continue  # no claims but its presence: no child needed
                if suffix == ".csv":
                    answer = ask(worker, state, {**request, "phase": "profile"})
                    if answer is not None and answer["profile"] is not None:
                        profile = answer["profile"]
                        profiles.setdefault(rel, {})[label] = (list(profile["header"]), set(profile["unique"]))
                else:
                    ask(worker, state, {**request, "phase": "claims"})
        for rel, versions in sorted(profiles.items()):
            key_column = key_column_of(list(versions.values()))
            for label in versions:
                request = {"rel": rel, "path": str(files_by_rollout[label][rel]), "what": f"{label}/{rel}",
                           "phase": "csv", "key_column": key_column}
                ask(worker, spent[label], request)
    for label, state in sorted(spent.items()):
        for why, skipped in state.skipped.items():
            shown = ", ".join(skipped[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
            warnings.append(f"{label}: {len(skipped)} file(s) were not read for claims ({shown}): {why}; "
                            "only their presence is compared")
    return claims, warnings


if __name__ == "__main__":
    serve()


def extract_claims(
    files_by_rollout: dict[str, dict[str, Path]], limits: ZipLimits | None = None,
) -> tuple[dict[str, list[Claim]], list[str]]:
    """Claims of every rollout, from ``{label: {relative path: file}}``; plus warnings.

    A file that cannot be parsed still yields its ``(file)`` claim and a warning. Every file is
    read in a child process under the caps and budgets of the module docstring; a file cut short
    by one keeps the claims read before it and adds a warning that names it and the cap.
    """
    return extract_bounded(files_by_rollout, limits or ZipLimits.from_env())
