"""The committed fixture tasks are exactly what make_fixtures.py writes (deterministic)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _generator(fixture_root: Path):
    spec = importlib.util.spec_from_file_location("make_fixtures", fixture_root / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _files(root: Path) -> dict[str, bytes]:
    """Every file of a fixture tree, without the bytecode caches a test that imports its graders leaves."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def test_generator_reproduces_the_committed_fixtures(tmp_path: Path, fixture_root: Path) -> None:
    generator = _generator(fixture_root)
    generator.make_finance(tmp_path)
    generator.make_cleanup(tmp_path)
    generator.make_report(tmp_path)
    for name in generator.TASKS:
        fresh, committed = _files(tmp_path / name), _files(fixture_root / name)
        assert sorted(fresh) == sorted(committed), name
        changed = [path for path in fresh if fresh[path] != committed[path]]
        assert not changed, f"{name}: rerun make_fixtures.py; these differ: {changed}"


def test_each_fixture_task_has_rollouts_inputs_keys_and_scores(fixture_root: Path) -> None:
    generator = _generator(fixture_root)
    for name in generator.TASKS:
        task = fixture_root / name
        rollouts = list((task / "rollouts").iterdir())
        assert 4 <= len(rollouts) <= 6
        assert (task / "task.md").is_file() and any((task / "inputs").iterdir())
        assert (task / "scores.json").is_file()
