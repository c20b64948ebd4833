"""veriscale's Inspect AI scorers and epoch reducer, in real ``inspect_ai.eval`` runs.

The solver model is a real ``llama_cpp.server``; the verifier is veriscale's embedded model. The
logs are read back with ``read_eval_log`` (what ``inspect view`` reads).

Inspect's own OpenAI-compatible provider (``llama-cpp-python/smollm2``) needs openai 3.4 or later,
and veriscale[rl]'s ``verifiers`` pins openai below 3, so in an environment holding both (this
suite's: the test extra includes rl) the server is reached through a plain HTTP provider registered
with Inspect's own ``@modelapi`` (:func:`_solver_model`), and through Inspect's provider only where
openai 3.4 or later is installed; everything else is the same. Inspect's provider itself is tested
by tests/integrations/test_inspect_provider.py, which runs docs/INTEGRATIONS.md's example with the
``inspect`` of ``.tools/inspect-venv`` (openai 3.x).
"""

from __future__ import annotations

import importlib
import math
import sys
import warnings
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

# the test extra installs inspect-ai: without it these tests fail at import, never skip
from inspect_ai import Epochs, Task, eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import (  # noqa: E402
    ChatMessageAssistant,
    ChatMessageUser,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    modelapi,
)
from inspect_ai.solver import Generate, TaskState, solver  # noqa: E402

from veriscale.engine.store import Store  # noqa: E402
from veriscale.errors import UserError  # noqa: E402
from veriscale.models.weak_judge import WeakJudgeWarning  # noqa: E402

CRITERIA = "## Answer\nThe reply answers the request directly and briefly.\n"


@solver
def generate_unless_skipped():
    """Inspect's generate(), except for a sample whose metadata says skip: it is left with no output."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.metadata.get("skip"):
            return state
        return await generate(state)

    return solve


@pytest.fixture()
def criteria_file(tmp_path: Path) -> str:
    path = tmp_path / "answer.md"
    path.write_text(CRITERIA, encoding="utf-8")
    return str(path)


@modelapi(name="llama-http")
def _llama_http() -> type[ModelAPI]:
    class LlamaHTTP(ModelAPI):
        """A chat completion from the server with httpx, for an openai older than Inspect's providers need."""

        def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                     config: GenerateConfig = GenerateConfig(), **_: object) -> None:
            super().__init__(model_name=model_name, base_url=base_url, api_key=api_key, config=config)

        async def generate(self, input, tools, tool_choice, config):  # noqa: A002 - Inspect's signature
            body = {"model": self.model_name, "messages": [{"role": m.role, "content": m.text} for m in input],
                    **{k: v for k, v in (("max_tokens", config.max_tokens), ("temperature", config.temperature))
                       if v is not None}}
            async with httpx.AsyncClient(timeout=120) as client:
                reply = await client.post(f"{self.base_url}/chat/completions", json=body)
            reply.raise_for_status()
            return ModelOutput.from_content(self.model_name, reply.json()["choices"][0]["message"]["content"] or "")

    return LlamaHTTP


def _solver_model() -> str:
    """Inspect's llama-cpp-python provider (OpenAI-compatible) where its openai is installed, else llama-http."""
    major, minor = (int(part) for part in version("openai").split(".")[:2])
    return "llama-cpp-python/smollm2" if (major, minor) >= (3, 4) else "llama-http/smollm2"


def _run_of(path: str, run_id: int) -> tuple[object, list[dict]]:
    st = Store.open(path)
    try:
        return st.run(run_id), st.run_calls(run_id)
    finally:
        st.close()


def _eval(task: Task, url: str, log_dir: Path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakJudgeWarning)  # said once per process; the embedded model is weak
        [log] = inspect_eval(task, model=_solver_model(), model_base_url=url, log_dir=str(log_dir),
                             display="none", max_tokens=8, **kwargs)
    assert log.status == "success", log.error
    return read_eval_log(log.location)  # the file inspect view reads


@pytest.mark.embedded
@pytest.mark.server
def test_scores_and_progress_land_in_the_log_linked_to_the_store(llama_server: str, criteria_file: str,
                                                                 tmp_path: Path) -> None:
    from veriscale.integrations.inspect import NO_OUTPUT, veriscale_progress, veriscale_scorer

    store = tmp_path / "runs.sqlite3"
    samples = [
        Sample(id="chat", input=[ChatMessageUser(content="Name a colour."), ChatMessageAssistant(content="Blue."),
                                 ChatMessageUser(content="Name a fruit.")]),
        Sample(id="empty", input="Name a fruit.", metadata={"skip": True}),
    ]
    task = Task(dataset=samples, solver=generate_unless_skipped(),
                scorer=[veriscale_scorer(criteria=criteria_file, repeats=1, model="embedded", store=str(store)),
                        veriscale_progress(repeats=1, model="embedded", store=str(store))])
    log = _eval(task, llama_server, tmp_path / "logs")
    by_id = {s.id: s for s in log.samples or []}

    chat = by_id["chat"].scores or {}
    reward, progress = chat["veriscale"], chat["veriscale_progress"]
    assert 0.0 <= float(reward.value) <= 1.0
    assert reward.explanation and reward.answer
    meta = reward.metadata or {}
    assert set(meta["criteria"]) == {"Answer"}
    assert 0.0 <= meta["criteria"]["Answer"]["reward"] <= 1.0
    assert math.isclose(sum(meta["criteria"]["Answer"]["label_probs"].values()), 1.0, abs_tol=0.05)
    assert "low_label_mass" in meta and "injection_suspected" in meta
    run, calls = _run_of(meta["store"], meta["run_id"])
    assert run is not None and run.command == "score" and run.status == "ok"
    assert calls  # the verifier's calls are linked to the run

    pmeta = progress.metadata or {}
    assert 0.0 <= float(progress.value) <= 1.0
    assert [p["step"] for p in pmeta["curve"]["points"]] == [1, 2, 3]  # agent, user, agent after the task
    assert "voc" in pmeta

    empty = by_id["empty"].scores or {}
    for score in empty.values():
        assert math.isnan(float(score.value)) and score.explanation == NO_OUTPUT
    assert log.results is not None and {s.name for s in log.results.scores} == {"veriscale", "veriscale_progress"}


@pytest.mark.embedded
@pytest.mark.server
def test_epochs_become_best_of_n_with_the_veriscale_reducer(llama_server: str, criteria_file: str,
                                                           tmp_path: Path) -> None:
    from veriscale.integrations.inspect import veriscale_best, veriscale_progress, veriscale_scorer

    store = tmp_path / "runs.sqlite3"
    task = Task(dataset=[Sample(id="fruit", input="Name a fruit.")], solver=generate_unless_skipped(),
                scorer=[veriscale_scorer(criteria=criteria_file, repeats=1, model="embedded", store=str(store)),
                        veriscale_progress(repeats=1, model="embedded", store=str(store))],
                epochs=Epochs(3, veriscale_best(repeats=1)), config=GenerateConfig(temperature=1.5))
    log = _eval(task, llama_server, tmp_path / "logs", score_display=False)

    epochs = [s.scores["veriscale"] for s in log.samples or [] if s.scores]
    assert len(epochs) == 3
    reductions = {r.scorer: r for r in log.reductions or []}
    reduction = reductions["veriscale"]
    assert reduction.reducer == "veriscale_best"
    [reduced] = reduction.samples
    [progress] = reductions["veriscale_progress"].samples  # another scorer's Scores: their mean
    values = [s.scores["veriscale_progress"].value for s in log.samples or [] if s.scores]
    assert math.isclose(float(progress.value), sum(values) / len(values))
    pick = (reduced.metadata or {})["veriscale_pick"]
    assert reduced.value in [e.value for e in epochs] and reduced.answer in [e.answer for e in epochs]
    by_epoch = {s.epoch: s.scores["veriscale"] for s in log.samples or [] if s.scores}
    assert by_epoch[pick["epoch"]].answer == reduced.answer and by_epoch[pick["epoch"]].value == reduced.value
    assert pick["distinct_outputs"] == len({e.answer for e in epochs}) > 1  # sampled at temperature 1.5
    run, calls = _run_of(pick["store"], pick["run_id"])
    assert run is not None and run.command == "select" and run.status == "ok"
    assert calls
    st = Store.open(store)
    try:  # Inspect reduces more than once (results, then the log): one selection was run and recorded
        assert [r.command for r in st.runs()].count("select") == 1
    finally:
        st.close()


def test_a_missing_extra_is_one_sentence_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith("veriscale.integrations.inspect")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    monkeypatch.setitem(sys.modules, "inspect_ai.scorer", None)
    with pytest.raises(UserError) as caught:
        importlib.import_module("veriscale.integrations.inspect")
    message = str(caught.value)
    assert "pip install 'veriscale[inspect]'" in message and "\n" not in message and message.count(". ") == 0
