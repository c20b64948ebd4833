"""``veriscale models check`` reports whether the endpoint sees images (``veriscale.models.vision_probe``):
in its JSON (``vision``) and its table (the ``images`` row); ``--vision`` makes an endpoint that does
not see images exit non-zero with one sentence. A text model still passes the check itself.

The vision endpoint is the test double ``tests.support.vision_server.VisionRecordingServer`` (no
vision model installs offline), run in its vision and its ``text_only`` mode.
"""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from tests.support.vision_server import IMAGE_TOKENS, VisionRecordingServer
from veriscale import schemas
from veriscale.cli import app


@pytest.fixture
def store(tmp_path) -> str:
    return str(tmp_path / "runs.sqlite3")


def _check(*args: str):
    return CliRunner().invoke(app, ["models", "check", *args])


def _valid(doc: dict) -> dict:
    Draft202012Validator(schemas.load("models-check")).validate(doc)
    return doc


def test_a_vision_endpoint_shows_images_seen(store) -> None:
    with VisionRecordingServer() as srv:
        result = _check(f"{srv.url}#vision-double", "--store", store, "--json")
        assert result.exit_code == 0, result.output
        doc = _valid(json.loads(result.stdout))
        assert doc["logprobs"] is True
        assert doc["vision"]["sees_images"] is True and doc["vision"]["image_tokens"] == IMAGE_TOKENS
        assert doc["vision"]["error"] is None and len(doc["vision"]["evidence"]) == 3
        table = _check(f"{srv.url}#vision-double", "--store", store, "--vision")
    assert table.exit_code == 0, table.output
    assert f"seen ({IMAGE_TOKENS} tokens each)" in table.stdout


def test_a_text_only_endpoint_shows_images_not_seen_and_still_passes(store) -> None:
    with VisionRecordingServer(text_only=True) as srv:
        result = _check(f"{srv.url}#vision-double", "--store", store, "--json")
        assert result.exit_code == 0, result.output  # the logprobs verdict is the command's result
        doc = _valid(json.loads(result.stdout))
        assert doc["logprobs"] is True
        assert doc["vision"]["sees_images"] is False and doc["vision"]["image_tokens"] is None
        assert any("not seen" in e for e in doc["vision"]["evidence"])
        table = _check(f"{srv.url}#vision-double", "--store", store)
    assert table.exit_code == 0, table.output
    assert "not seen: colour probe" in table.stdout
    assert "--model" in table.stdout and "--mmproj" in table.stdout  # what to point --model at


def test_vision_option_exits_non_zero_with_one_sentence(store) -> None:
    with VisionRecordingServer(text_only=True) as srv:
        result = _check(f"{srv.url}#vision-double", "--store", store, "--json", "--vision")
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["vision"]["sees_images"] is False  # the report is still written
    error = result.stderr.strip()
    assert len(error.splitlines()) == 1, error
    assert "does not see images" in error and "--model" in error and "--mmproj" in error
    assert "‹" not in error  # settings named as flags


def test_the_embedded_model_says_it_has_no_vision(store) -> None:
    result = _check("embedded", "--store", store, "--json")
    assert result.exit_code == 0, result.output
    vision = _valid(json.loads(result.stdout))["vision"]
    assert vision["sees_images"] is False and vision["image_tokens"] is None
    (sentence,) = vision["evidence"]
    assert "has no vision" in sentence and "--model" in sentence and "--mmproj" in sentence
    refused = _check("embedded", "--store", store, "--vision")
    assert refused.exit_code == 2
    assert "has no vision" in refused.stderr.splitlines()[-1]
    assert [line for line in refused.stderr.splitlines() if line.startswith("error:")] == [refused.stderr.splitlines()[-1]]
    assert "not seen:" in refused.stdout and "--model" in refused.stdout  # the table names the flag
