"""Generated input files and folders: any importer format, mutated, in any of the suffixes veriscale
reads (gzip and Inspect ``.eval`` zips included), corrupted at the byte level.

    tree = input_tree(gen)              # {"runs/a.jsonl": Blob(...), "runs/r1/pipe.json": Special("fifo")}
    root = write_tree(tmp, tree)        # the input to give veriscale (the file, or the folder)
"""

from __future__ import annotations

import gzip
import io
import os
import zipfile
from pathlib import Path

from tests.fuzz.records import format_record, inspect_sample, plain_text
from tests.fuzz.strategies import Blob, Gen, dumps

JSON_SUFFIXES = [".json", ".jsonl", ".ndjson", ".traj", ".json.gz", ".jsonl.gz", "", ".md", ".txt"]
TEXT_SUFFIXES = [".md", ".txt", ".diff", ".patch", "", ".markdown", ".rst", ".md.gz", ".csv", ".py"]


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate in a text file: bytes that are not UTF-8


def _maybe_gzip(suffix: str, data: bytes) -> Blob:
    return Blob(gzip.compress(data, mtime=0) if suffix.endswith(".gz") else data)


def json_document(gen: Gen, jsonl: bool) -> str:
    """One mutated record, or (JSONL) several lines: records of one format, blank or bad lines."""
    _, record = format_record(gen)
    if not jsonl:
        return dumps(gen.mutate(record))
    lines = [dumps(gen.mutate(record))]
    for _ in range(gen.rng.randint(0, 3)):
        how = gen.rng.randrange(6)
        lines.append(["", "   ", "not json"][how] if how < 3 else dumps(
            gen.mutate(record) if how == 3 else gen.json() if how == 4 else format_record(gen)[1]))
    return "\n".join(lines)


def json_file(gen: Gen) -> tuple[str, Blob]:
    suffix = gen.choice(JSON_SUFFIXES)
    text = json_document(gen, suffix.startswith((".jsonl", ".ndjson")) or gen.chance(0.15))
    data = _maybe_gzip(suffix, gen.corrupt(encode(text)))
    return suffix, Blob(gen.corrupt(data)) if suffix.endswith(".gz") else data


def text_file(gen: Gen) -> tuple[str, Blob]:
    suffix = gen.choice(TEXT_SUFFIXES)
    return suffix, _maybe_gzip(suffix, gen.corrupt(encode(plain_text(gen))))


def eval_zip(gen: Gen) -> tuple[str, Blob]:
    """An Inspect ``.eval`` archive: header.json and samples/*.json, mutated or left out."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        header = gen.mutate({"eval": {"task": gen.short(), "model": gen.short()}})
        archive.writestr(gen.choice(["header.json", "header.json", "_journal/start.json", "other.json"]),
                         gen.corrupt(encode(dumps(header))))
        for k in range(gen.rng.randint(0, 3)):
            archive.writestr(f"samples/{k}_epoch_1.json", gen.corrupt(encode(dumps(gen.mutate(inspect_sample(gen))))))
    data = buffer.getvalue()
    return ".eval", Blob(gen.corrupt(data) if gen.chance(0.2) else data)


class Special(str):
    """A tree entry that is not a plain file: ``fifo``, ``loop`` (a link to its own folder) or
    ``link:/dev/zero`` (a link to a device)."""


SPECIALS = [Special("fifo"), Special("loop"), Special("link:/dev/zero"), Special("link:/dev/null"),
            Special("link:missing-target")]


def any_file(gen: Gen) -> tuple[str, Blob | Special]:
    roll = gen.rng.random()
    if roll < 0.03:
        return gen.choice([".json", ".jsonl", ".md", ".eval", ".diff", ""]), gen.choice(SPECIALS)
    return json_file(gen) if roll < 0.7 else text_file(gen) if roll < 0.9 else eval_zip(gen)


def input_tree(gen: Gen) -> dict[str, Blob]:
    """One file, or a folder of files, or a folder of rollout folders (task.md, result.json...)."""
    roll = gen.rng.random()
    if roll < 0.8:
        suffix, data = any_file(gen)
        return {f"input{suffix}": data}
    tree: dict[str, Blob] = {}
    if gen.chance(0.5):
        tree["runs/task.md"] = Blob(gen.corrupt(encode(plain_text(gen))))
    rollouts = roll >= 0.9
    for k in range(gen.rng.randint(1 if rollouts else 0, 3)):
        if not rollouts:
            suffix, data = any_file(gen)
            tree[f"runs/f{k}{suffix}"] = data
            continue
        run = f"runs/run{k}"
        for j in range(gen.rng.randint(0, 3)):
            suffix, data = any_file(gen)
            tree[f"{run}/{gen.choice(['agent/trajectory', 'answer', 'output', 'notes'])}{j}{suffix}"] = data
        if gen.chance(0.5):
            result = gen.mutate({"verifier_result": {"rewards": {"reward": 1}}, "reward": 1, "task_name": "t"})
            tree[f"{run}/result.json"] = Blob(gen.corrupt(encode(dumps(result))))
        if gen.chance(0.4):
            reward = gen.choice(["1", "0.5", "nan", "1e999", "x", "9" * 5000, "", gen.text()])
            tree[f"{run}/verifier/reward.txt"] = Blob(gen.corrupt(encode(reward)))
        if not any(p.startswith(run + "/") for p in tree):
            tree[f"{run}/.keep"] = Blob(b"")
    tree.setdefault("runs/.hidden", Blob(b""))
    return tree


def write_tree(root: Path, tree: dict[str, bytes]) -> Path:
    """Write ``tree`` under ``root``; returns the input to give veriscale (the file, or ``runs/``)."""
    for name, data in tree.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not isinstance(data, Special):
            path.write_bytes(data)
        elif data == "fifo":
            os.mkfifo(path)
        elif data == "loop":
            path.symlink_to(".", target_is_directory=True)
        else:
            path.symlink_to(data.split(":", 1)[1])
    first = next(iter(tree))
    return root / first.split("/")[0]
