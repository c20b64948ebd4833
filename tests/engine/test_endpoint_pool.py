"""An EndpointPool stands where one backend does through members it declares, not a catch-all:
what ModelBackend declares is its first endpoint's, an optional ability is there exactly when
that backend has it, anything else is an AttributeError, and closing the pool closes each backend."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.engine.routing import EndpointPool
from veriscale.models.base import ModelBackend


class SpannedModel(ScriptedScoreModel):
    """TEST DOUBLE: the scripted model with one optional ability (token spans) and a close counter."""

    closed = 0

    def token_spans(self) -> str:
        return "spans of " + self.uri

    async def aclose(self) -> None:
        self.closed += 1


def test_the_pool_is_a_model_backend_named_by_its_first_endpoint() -> None:
    first, second = SpannedModel(), ScriptedScoreModel()
    pool = EndpointPool([first, second])
    assert isinstance(pool, ModelBackend)
    assert (pool.uri, pool.display_name, pool.fingerprint()) == (first.uri, first.display_name, first.fingerprint())
    assert pool.count_tokens("a b c") == 3 and pool.context_size() == first.context_size()
    assert pool.token_spans() == "spans of " + first.uri  # an ability the first endpoint has


def test_an_ability_the_first_endpoint_lacks_is_absent_and_an_unknown_name_is_an_error() -> None:
    pool = EndpointPool([ScriptedScoreModel(), SpannedModel()])
    assert getattr(pool, "token_spans", None) is None and not hasattr(pool, "calibration_key")
    with pytest.raises(AttributeError):
        pool.no_such_member  # noqa: B018 - a member the pool does not declare


def test_an_ability_protocol_sees_on_the_pool_what_it_sees_on_the_first_endpoint() -> None:
    """isinstance on a Protocol of methods reads the class: the pool's class has exactly the first
    endpoint's abilities (a pool over the plain double once passed as a ServerTokenizer and then
    failed on ``tokenizer_requests``)."""
    from veriscale.models.abilities import Calibrated, JointReads, ServerTokenizer

    class Tokenized(SpannedModel):
        def tokenizer_requests(self) -> int:
            return 7

    plain, tokenized = EndpointPool([ScriptedScoreModel()]), EndpointPool([Tokenized(), ScriptedScoreModel()])
    assert not isinstance(plain, ServerTokenizer) and not isinstance(plain, Calibrated)
    assert isinstance(plain, JointReads) and plain.supports_joint()
    assert isinstance(tokenized, ServerTokenizer) and tokenized.tokenizer_requests() == 7
    assert isinstance(plain, EndpointPool) and type(plain) is not type(tokenized)


def test_closing_the_pool_closes_each_backend_once() -> None:
    shared, other = SpannedModel(), SpannedModel()
    asyncio.run(EndpointPool([shared, other, shared]).aclose())
    assert (shared.closed, other.closed) == (1, 1)
