"""``harness materialize`` reads a source's scores files through the input reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from veriscale.errors import UserError
from veriscale.harness.workspace.materialize import materialize


def _source(root: Path, scores: bytes) -> Path:
    source = root / "src"
    (source / "rollouts" / "run-0").mkdir(parents=True)
    (source / "task.md").write_text("Sum the numbers.\n")
    (source / "rollouts" / "run-0" / "answer.md").write_text("Total: 3\n")
    (source / "scores.json").write_bytes(scores)
    return source


@pytest.mark.parametrize("scores,needle", [
    (b"[" * 100_000 + b"]" * 100_000, "more than 100 deep"),
    (b'{"run-0": ' + b"7" * 5000 + b"}", "5,000 characters long"),
    (b'{"run-0": 0.5, "note": "caf\xe9"}', "not UTF-8 text"),
])
def test_a_bad_scores_file_is_one_sentence(tmp_path, scores, needle):
    with pytest.raises(UserError, match=needle) as error:
        materialize(_source(tmp_path, scores), tmp_path / "task")
    assert "scores file" in str(error.value) and "scores.json" in str(error.value)
