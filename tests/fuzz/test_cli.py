"""Fuzz the command line in process (typer's CliRunner on ``veriscale.cli:app``): score, compare,
select, track, bench, runs and harness materialize with generated arguments (numbers out of range,
nasty strings, unknown names) and generated input files (every importer format mutated, bad UTF-8,
a FIFO, ``/dev/zero``, a folder, a missing path, bad bytes on stdin, a 10,000-candidate pool).

Property: each invocation exits 0, or exits non-zero with one ``error:`` line (notes and warnings
aside) or click's usage message; never a Python traceback, never past the hang guard. Model calls
go to scripted test doubles (``--model scripted`` / ``scripted-progress``), which answer at once.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from typer.testing import CliRunner

from tests.fuzz.files import any_file, encode, json_document
from tests.fuzz.guard import bounded, failed, one_sentence_problem, outcome
from tests.fuzz.profile import fuzz_settings
from tests.fuzz.records import plain_text
from tests.fuzz.strategies import NASTY_STRINGS, Gen, gens
from tests.fuzz.test_api import FlatModel
from tests.support.scripted_progress import ScriptedProgressModel
from veriscale.cli import app
from veriscale.engine.store import Store
from veriscale.models.registry import SCHEMES, register_backend

SUITE = "cli"
INTS = ["-1", "0", "1", "2", "3", "7", "64", "2147483648", "9223372036854775808", "1" + "0" * 30, "x", "1.5", ""]
FLOATS = ["0", "0.5", "0.9", "1", "1.5", "-1", "nan", "inf", "1e309", "x", ""]
PREFIXES = ("error:", "note:", "warning:", "progress:")  # progress: lines on a piped stderr


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """The scripted doubles as model URIs, and a store with runs (one with a corrupted result)."""
    saved = dict(SCHEMES)
    register_backend(("scripted",), lambda _uri: FlatModel(), forms=("scripted",))
    register_backend(("scripted-progress",), lambda _uri: ScriptedProgressModel(), forms=("scripted-progress",))
    root = tmp_path_factory.mktemp("cli")
    corrupt = root / "corrupt.sqlite3"
    store = Store.open(corrupt)
    run_id = store.start_run("score", "scripted", {"task": "t"})
    store.finish_run(run_id, "ok", {"reward": 0.5})
    store.close() if hasattr(store, "close") else None
    with sqlite3.connect(corrupt) as db:  # what a crash half-way through a write, or another tool, leaves
        db.execute("UPDATE runs SET result = ? WHERE id = ?", ('{"reward": 0.5, "cut', run_id))
    yield root
    SCHEMES.clear()
    SCHEMES.update(saved)


def _value(gen: Gen, kind: str) -> str:
    if kind == "int":
        return gen.choice(INTS)
    if kind == "float":
        return gen.choice(FLOATS)
    return gen.choice([gen.short(), gen.choice(NASTY_STRINGS)[:50]])


class Inputs:
    """The files one invocation reads, written under ``folder``; ``stdin`` when one of them is ``-``."""

    def __init__(self, gen: Gen, folder: Path) -> None:
        self.gen, self.folder, self.count, self.stdin = gen, folder, 0, None

    def _name(self, suffix: str) -> Path:
        self.count += 1
        return self.folder / f"in{self.count}{suffix}"

    def text(self) -> str:
        """A task or candidate argument: a text file mostly, else one of the awkward inputs."""
        gen = self.gen
        roll = gen.rng.random()
        if roll < 0.75:
            path = self._name(gen.choice([".md", ".txt", ".json", ""]))
            content = json_document(gen, False) if path.suffix == ".json" and gen.chance(0.5) else plain_text(gen) or "task"
            path.write_bytes(gen.corrupt(encode(content)))
            return str(path)
        return self.awkward()

    def run_file(self) -> str:
        """A runs argument: a file in any importer format, or a folder, or an awkward input."""
        gen = self.gen
        roll = gen.rng.random()
        if roll < 0.7:
            suffix, data = any_file(gen)
            path = self._name(suffix)
            if isinstance(data, str):  # a Special: leave it to awkward()
                return self.awkward()
            path.write_bytes(data)
            return str(path)
        if roll < 0.8:
            folder = self._name("")
            folder.mkdir()
            for k in range(gen.rng.randint(0, 3)):
                suffix, data = any_file(gen)
                if not isinstance(data, str):
                    (folder / f"r{k}{suffix}").write_bytes(data)
            return str(folder)
        if roll < 0.82:
            return self.pool(gen.choice([2, 50, 10_000]))
        return self.awkward()

    def pool(self, n: int) -> str:
        path = self._name(".jsonl")
        path.write_text("".join(json.dumps({"instance_id": "t", "model_patch": f"patch {k}", "model_name_or_path": f"m{k}"})
                                + "\n" for k in range(n)))
        return str(path)

    def awkward(self) -> str:
        gen = self.gen
        kind = gen.choice(["fifo", "devzero", "folder", "missing", "stdin", "big", "nasty"])
        if kind == "stdin" and self.stdin is None:
            self.stdin = gen.corrupt(encode(gen.text() or "x")) if gen.chance(0.7) else b"\xff\xfe\x00bad"
            return "-"
        if kind == "fifo":
            path = self._name(".md")
            os.mkfifo(path)
            return str(path)
        if kind == "devzero":
            path = self._name(".md")
            path.symlink_to("/dev/zero")
            return str(path)
        if kind == "folder":
            path = self._name("")
            path.mkdir()
            return str(path)
        if kind == "big":
            path = self._name(".md")
            path.write_bytes(b"x" * (50 << 20))  # one 50 MB line
            return str(path)
        if kind == "missing":
            return str(self.folder / "missing.md")
        return gen.short() or "x"


def _options(gen: Gen, table: dict[str, str]) -> list[str]:
    args: list[str] = []
    for flag in gen.rng.sample(sorted(table), gen.rng.randint(0, min(4, len(table)))):
        kind = table[flag]
        args += [flag] if kind == "flag" else [flag, _value(gen, kind) if kind in ("int", "float", "str") else gen.choice(kind.split("|"))]
    return args


VERDICT = {"--scale": "letters|digits|yesno|letters:5|digits:3|letters:0|letters:999|nope", "--repeats": "int",
           "--seed": "int", "--max-calls": "int", "--concurrency": "int", "--criteria": "general|agent|nope",
           "--criterion": "Correctness|nope", "--dry-run": "flag", "--json": "flag", "--refresh": "flag",
           "--discrete": "flag"}
SELECT = {**VERDICT, "--method": "ppt|round_robin|knockout|pointwise|nope", "-k": "int", "--min-confidence": "float",
          "--budget-tokens": "int", "--format": "atif|text|openai-messages|nope", "--no-adaptive": "flag"}
TRACK = {"--id": "str", "--every": "int", "--checkpoints": "1,2,3|0|-1|x|1,,2|9223372036854775808", "--stall-window": "int",
         "--regression-drop": "float", "--done-threshold": "float", "--step-tokens": "int", "--budget-tokens": "int",
         "--json": "flag", "--repeats": "int", "--max-calls": "int", "--yes": "flag"}
BENCH = {"--kind": "pairs|pools|nope", "--limit": "int", "--seed": "int", "--dry-run": "flag", "--json": "flag",
         "--sweep": "g=5,10|k=1,2|c=general|repeats=1,2|x=1|g=", "--all-tasks": "flag", "-k": "int", "--yes": "flag"}
# A rate limit the run must obey (--rpm 2 over a dozen calls waits minutes) is a correct, idle
# run, not a hang: the rate flags get bad values and limits too wide to throttle a small run.
RATES = "-1|0|1000000|2147483648|9223372036854775808|1e30|x|1.5|"
GLOBAL = {"--rpm": RATES, "--tpm": RATES, "--deadline": "float", "--routing": "affinity|round_robin|nope"}


def argv_for(gen: Gen, inputs: Inputs, root: Path) -> list[str]:
    """One generated command line (global options, a command, its arguments and options)."""
    store = ["--store", str(root / "shared.sqlite3")]
    command = gen.choice(["score", "score", "compare", "select", "select", "track", "bench", "runs", "materialize"])
    head = _options(gen, GLOBAL) if gen.chance(0.2) else []
    if command == "score":
        return head + ["score", inputs.text(), inputs.text(), "--model", "scripted", *store, *_options(gen, VERDICT)]
    if command == "compare":
        return head + ["compare", inputs.text(), inputs.text(), inputs.text(), "--model", "scripted", *store,
                       *_options(gen, VERDICT)]
    if command == "select":
        paths = [inputs.run_file() for _ in range(gen.rng.randint(0, 4))]
        task = ["--task", inputs.text()] if gen.chance(0.4) else []
        return head + ["select", *paths, *task, "--model", "scripted", *store, *_options(gen, SELECT)]
    if command == "track":
        task = ["--task", inputs.text()] if gen.chance(0.3) else []
        return head + ["track", inputs.run_file(), *task, "--model", "scripted-progress", *store, *_options(gen, TRACK)]
    if command == "bench":
        data = ["--progress", inputs.run_file()] if gen.chance(0.3) else [inputs.run_file()]
        return head + ["bench", *data, "--model", "scripted", *store, *_options(gen, BENCH)]
    if command == "runs":
        which = ["--store", str(root / ("corrupt.sqlite3" if gen.chance(0.3) else "shared.sqlite3"))]
        sub = gen.choice(["list", "show", "export"])
        if sub == "show":
            return ["runs", "show", gen.choice(INTS), *which] + (["--calls"] if gen.chance(0.5) else [])
        if sub == "list":
            return ["runs", "list", *which] + (["--limit", gen.choice(INTS)] if gen.chance(0.5) else []) + (
                ["--json"] if gen.chance(0.5) else [])
        return ["runs", "export", *which] + (["-o", str(inputs.folder / "out.jsonl")] if gen.chance(0.5) else [])
    source = inputs.run_file()
    dest = str(inputs.folder / gen.choice(["dest", "dest/nested", ""])) if gen.chance(0.8) else inputs.awkward()
    return ["harness", "materialize", source, dest] + _options(
        gen, {"--seed": "int", "-x": "str", "--task-file": "str", "--json": "flag", "--no-default-excludes": "flag"})


def check_result(result, argv: list[str]) -> None:
    what = " ".join(argv)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        exc = result.exception
        raise failed(SUITE, exc, what) from exc
    if result.exit_code == 0:
        outcome(SUITE, "accepted")
        return
    stderr = result.stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    usage = result.exit_code == 2 and ("Usage:" in stderr or "Error" in stderr and "╭" in stderr)
    if not usage:
        errors = [ln for ln in lines if ln.startswith("error:")]
        problem = None
        if len(errors) != 1:
            problem = f"{len(errors)} error lines"
        elif any(not ln.startswith(PREFIXES) for ln in lines):
            problem = "the error spans several lines"
        else:
            problem = one_sentence_problem(errors[0][len("error:"):])
        if problem is not None:
            outcome(SUITE, "traceback")
            raise AssertionError(f"{problem} (exit {result.exit_code}) for {what[:500]!r}: {stderr[-2000:]!r}")
    outcome(SUITE, "rejected")


@fuzz_settings(600, shrink=False)
@given(gen=gens())
def test_each_command_answers_or_refuses_in_one_sentence(scripted, gen):
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Inputs(gen, Path(tmp))
        argv = argv_for(gen, inputs, scripted)
        try:
            with bounded(" ".join(argv)):
                result = CliRunner().invoke(app, argv, input=inputs.stdin)
        except BaseException as exc:  # noqa: BLE001 - a hang (CliRunner keeps every other exception)
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise failed(SUITE, exc, " ".join(argv)) from exc
        check_result(result, argv)
