"""The Python API says what the CLI says: a verdict from the embedded model warns that it is a weak judge."""

import warnings

import pytest

from tests.support.scripted_model import ScriptedScoreModel
from veriscale import api
from veriscale.models.weak_judge import EMBEDDED_NOTICE, WeakJudgeWarning


class EmbeddedLike(ScriptedScoreModel):
    """TEST DOUBLE — the scripted model flagged as the embedded one (is_embedded, as EmbeddedModel)."""

    is_embedded = True


class TwoStageLike:
    """TEST DOUBLE — a two-stage shape whose scorer is the embedded one."""

    def __init__(self) -> None:
        self.reasoner, self.scorer = ScriptedScoreModel(), EmbeddedLike()


def test_a_verdict_from_the_embedded_model_warns_and_names_what_to_use_instead():
    with pytest.warns(WeakJudgeWarning) as caught:
        result = api.score("Say hi.", "GOOD hi", model=EmbeddedLike())
    assert result.reward is not None
    message = str(caught[0].message)
    assert message == EMBEDDED_NOTICE and "not a reliable judge" in message
    assert "model='http://127.0.0.1:8000/v1#your-model'" in message  # worded for the Python API
    with pytest.warns(WeakJudgeWarning):
        api.compare("Say hi.", "GOOD hi", "bye", model=EmbeddedLike())


def test_another_model_gives_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", WeakJudgeWarning)
        assert api.score("Say hi.", "GOOD hi", model=ScriptedScoreModel()).reward is not None


def test_a_two_stage_backend_with_the_embedded_scorer_counts_as_embedded():
    from veriscale.models.weak_judge import uses_embedded

    assert uses_embedded(TwoStageLike()) and not uses_embedded(ScriptedScoreModel())
