"""The names importable from ``veriscale``: one-call ``score``/``compare``, ``Verifier``, ``select``.

Logic runs on the scripted test double; the README's Python snippet runs as written on the
embedded model.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import veriscale
from tests.support.scripted_model import ScriptedScoreModel
from veriscale import CompareResult, ScoreResult, compare, score
from veriscale.errors import UserError

REPO = Path(__file__).resolve().parents[1]
TASK = "Count the lines of every .log file under /var/log."


def test_the_public_names_are_exactly_the_documented_ones():
    assert sorted(veriscale.__all__) == sorted([
        "CompareResult", "ProgressTracker", "Reading", "ScoreResult", "Selection", "Verifier", "acompare", "ascore",
        "aselect", "compare", "load_backend", "score", "select", "track"])
    from veriscale.progress import ProgressTracker, track

    assert veriscale.track is track and veriscale.ProgressTracker is ProgressTracker
    from veriscale.selection.select import Selection, select
    from veriscale.verify.reward import Verifier

    assert veriscale.select is select and veriscale.Selection is Selection and veriscale.Verifier is Verifier
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        veriscale.nothing  # noqa: B018


def test_score_and_compare_give_verdicts_like_the_verifier():
    model = ScriptedScoreModel()
    good = score(TASK, "GOOD: find /var/log -name '*.log' -exec cat {} + | wc -l", model=model)
    bad = score(TASK, "echo 42", model=model)
    assert isinstance(good, ScoreResult) and good.reward > 0.8 and bad.reward < 0.2
    assert good.usage.model_calls == 3 and set(good.criteria) == {"Correctness", "Instruction following", "Completeness"}
    verdict = compare(TASK, "echo 42", "GOOD answer", model=model, criteria="agent")
    assert isinstance(verdict, CompareResult) and verdict.p_a_wins < 0.05
    assert verdict.repeats_effective == 2 and verdict.usage.model_calls == 12
    assert verdict.reward_b > verdict.reward_a


def test_a_store_path_makes_a_rerun_free(tmp_path):
    store = tmp_path / "runs.sqlite3"
    first = compare(TASK, "GOOD", "bad", model=ScriptedScoreModel(), store=str(store))
    again = compare(TASK, "GOOD", "bad", model=ScriptedScoreModel(), store=store)
    assert first.usage.model_calls == 12 and again.usage.model_calls == 0 and again.usage.cache_hits == 12
    assert again.p_a_wins == pytest.approx(first.p_a_wins)


def test_failed_calls_give_no_reward_and_say_why():
    model = ScriptedScoreModel()
    model.fail_when = lambda req: "Correctness" in req.messages[-1].content
    result = score(TASK, "GOOD", model=model)
    assert result.failed and result.reward is None
    assert any("scripted failure" in e for e in result.errors)


@pytest.mark.parametrize("kwargs,needle", [
    ({"task": Path("task.md")}, "task must be text"),
    ({"candidate": "   "}, "candidate is empty"),
    ({"model": 5}, "model must be a model URI"),
    ({"model": "gpt-9"}, "unknown model URI 'gpt-9'"),
    ({"store": 3}, "store must be a file path"),
    ({"criteria": "no-such-set"}, "neither a pack"),
])
def test_bad_arguments_raise_one_clear_user_error(kwargs, needle):
    args = {"task": TASK, "candidate": "GOOD", "model": ScriptedScoreModel(), **kwargs}
    with pytest.raises(UserError, match=needle):
        score(args.pop("task"), args.pop("candidate"), **args)


def readme_python() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("### Python", 1)[1]
    return section.split("```python", 1)[1].split("```", 1)[0]


@pytest.mark.embedded
def test_the_readme_python_snippet_runs(tmp_path, monkeypatch, capsys):
    shutil.copytree(REPO / "examples" / "pair", tmp_path / "examples" / "pair")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(readme_python(), "README.md#python", "exec"), namespace)
    s, c, sel = namespace["s"], namespace["c"], namespace["sel"]
    assert 0.0 <= s.reward <= 1.0 and sum(s.criteria["Correctness"]["label_probs"].values()) == pytest.approx(1.0)
    assert 0.0 < c.p_a_wins < 1.0 and c.usage.model_calls == 12
    assert sel.best.id in {"a", "b"} and sel.reason.text
    assert len(capsys.readouterr().out.strip().splitlines()) == 3
    rerun = compare(namespace["task"], namespace["a"], namespace["b"], criteria="agent", store="runs.sqlite3")
    assert rerun.usage.model_calls == 0 and rerun.p_a_wins == pytest.approx(c.p_a_wins)


def test_a_backend_the_api_loads_from_a_uri_is_closed_after_the_verdict() -> None:
    from tests.support.scripted_model import ScriptedScoreModel, registered_scheme

    opened: list[ScriptedScoreModel] = []

    class ClosableModel(ScriptedScoreModel):
        """TEST DOUBLE: the scripted model, counting its aclose calls."""

        closed = 0

        async def aclose(self) -> None:
            self.closed += 1

    def load(uri: str) -> ClosableModel:
        opened.append(ClosableModel())
        return opened[-1]

    given = ClosableModel()
    with registered_scheme("closable", load, ("closable",)):
        veriscale.score("Say hi.", "hi GOOD", model="closable:x", criteria="general")
        veriscale.score("Say hi.", "hi GOOD", model=given, criteria="general")
    assert [m.closed for m in opened] == [1]  # the one it opened, once
    assert given.closed == 0  # a backend the caller handed over stays the caller's
