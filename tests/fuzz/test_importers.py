"""Fuzz every importer: generated and mutated files in each format (JSON/JSONL, gzip, ``.eval``
zips, text, diffs, folders of rollouts), with wrong types, huge numbers, deep nesting, lone
surrogates, bytes that are not UTF-8 and samples that are not objects.

Property: ``load_file`` returns candidates that can be stored (every string UTF-8, every exit
code a 64-bit integer, the whole candidate JSON), or refuses with a ``UserError`` of one
sentence; never another exception, never past the hang guard.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given

from tests.fuzz.files import input_tree, write_tree
from tests.fuzz.guard import REFUSED, outcome, run_one
from tests.fuzz.profile import fuzz_settings
from tests.fuzz.strategies import gens
from veriscale.data.importers import FORMATS, load_file
from veriscale.errors import UserError

SUITE = "importers"


def storable_problem(value: Any, where: str = "candidate") -> str | None:
    """Why ``value`` (a candidate as a dict) cannot go into the store, or None."""
    stack = [(where, value)]
    while stack:
        at, item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"{at} holds a string that is not UTF-8 (a lone surrogate): {item[:80]!r}"
        elif isinstance(item, dict):
            stack.extend((f"{at} key", k) for k in item if isinstance(k, str))
            stack.extend((f"{at}.{k}", v) for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((f"{at}[{k}]", v) for k, v in enumerate(item))
    return None


def check_candidates(candidates: list[Any]) -> None:
    assert isinstance(candidates, list) and candidates, "an accepted file gives at least one candidate"
    for cand in candidates:
        data = dataclasses.asdict(cand)
        problem = storable_problem(data)
        assert problem is None, problem
        json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")
        if cand.trajectory is not None:
            for step in cand.trajectory.steps:
                code = step.exit_code
                assert code is None or (isinstance(code, int) and -(2 ** 63) <= code < 2 ** 63), f"exit code {code!r}"


@fuzz_settings(2500)
@given(gen=gens())
def test_every_importer_reads_a_file_or_refuses_it_in_one_sentence(gen):
    tree = input_tree(gen)
    forced = gen.choice(sorted(FORMATS)) if gen.chance(0.2) else None
    with tempfile.TemporaryDirectory() as tmp:
        path = write_tree(Path(tmp), tree)
        what = f"load_file({sorted(tree)}, format={forced})"
        result = run_one(SUITE, what, lambda: load_file(path, forced), (UserError,))
        if result is REFUSED:
            return
        _name, candidates = result
        try:
            check_candidates(candidates)
        except AssertionError:
            outcome(SUITE, "traceback")
            raise
        outcome(SUITE, "accepted")
