"""Fitting five long runs into a small render budget asks a real llama_cpp.server's tokenizer a few
times, not hundreds: each text is tokenised once and cut at token offsets, and the rendered runs
still fit the budget by the server's own count. Without token ids (a server with no tokenizer) the
rendering is what it always was."""

from __future__ import annotations

import json
from collections import Counter

import httpx
import pytest

from tests.conftest import EXAMPLES
from tests.support.fault_server import FaultServer
from veriscale.data.model import Candidate, Step, Trajectory
from veriscale.data.pool import load_selection
from veriscale.data.token_spans import TokenSpans
from veriscale.models.uri import load_backend
from veriscale.selection.plan import plan_selection
from veriscale.selection.prompt_fit import fit_prompt
from veriscale.selection.rendering import Renderer, tokenizer_requests
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

POOL = EXAMPLES / "terminal_bench" / "merge-diff-arc-agi-task.jsonl"
BUDGET = 400  # far below each run's ~10k tokens: every run is cut


def _recorded(model) -> list[tuple[str, str]]:
    """Every tokenizer request the model's blocking client sends: (route, body)."""
    sent: list[tuple[str, str]] = []

    def hook(request: httpx.Request) -> None:
        if "tokenize" in request.url.path:
            sent.append((request.url.path, request.content.decode("utf-8")))

    model._client.event_hooks["request"].append(hook)
    return sent


def _verifier(model) -> Verifier:
    return Verifier(model, store=None, criteria=load_criteria("agent"), scale="letters")


@pytest.fixture(scope="module")
def pool():
    return load_selection([str(POOL)])


def test_five_long_runs_are_fitted_with_each_text_tokenised_once(llama_server, pool):
    task, candidates = pool
    assert len(candidates) == 5
    model = load_backend(f"{llama_server}#smollm2")
    sent = _recorded(model)
    plan = plan_selection(task, candidates, verifier=_verifier(model), budget_tokens=BUDGET)

    # the counter the run's cost reports is every request the client sent
    assert plan.tokenizer_requests == tokenizer_requests(model) == len(sent)
    assert max(Counter(sent).values()) == 1  # no text asked about twice
    # per run: its whole text, its pieces, the rendered text and its step marker; then the task, the
    # prompt without candidates, and the probes (route, baseline, separator, an elision marker)
    # fitting: at most 4 a candidate + 10; the read probe adds its one sentinel tokenisation (read_probe)
    assert len(sent) <= 4 * len(candidates) + 10 + 1, Counter(path for path, _ in sent)

    # what the judge reads fits the budget by the server's own count, and uses most of it
    checker = load_backend(f"{llama_server}#smollm2")
    shown = [checker.count_tokens(t) for t in plan.pool.texts]
    assert all(0.85 * BUDGET <= n <= BUDGET for n in shown), shown
    assert plan.budget_tokens == BUDGET and len(set(plan.pool.texts)) == 5
    for cand, text in zip(candidates, plan.pool.texts):  # cut, yet the last step is always kept
        assert "elided" in text and f"[step {len(cand.trajectory.steps)}]" in text
    # a pairwise prompt with the two longest runs fits the server's context (the fixture's n_ctx)
    fit = fit_prompt(_verifier(checker), task, BUDGET, pairwise=True)
    assert fit.overhead_tokens + 2 * max(shown) <= 8192


def test_the_old_search_by_counting_asks_hundreds_of_times_for_the_same_budget(llama_server, pool):
    """The same fitting over a plain counter (render's search, each try counted by the server): the
    cost the offsets remove, and the budget both hold."""
    task, candidates = pool
    model = load_backend(f"{llama_server}#smollm2")
    sent = _recorded(model)
    searched = plan_selection(task, candidates, verifier=_verifier(model), budget_tokens=BUDGET,
                              renderer=Renderer(model.count_tokens))
    old_requests = len(sent)

    fresh = load_backend(f"{llama_server}#smollm2")
    cut = plan_selection(task, candidates, verifier=_verifier(fresh), budget_tokens=BUDGET)
    assert old_requests > 10 * cut.tokenizer_requests, (old_requests, cut.tokenizer_requests)
    checker = load_backend(f"{llama_server}#smollm2")
    old_used = sum(checker.count_tokens(t) for t in searched.pool.texts)
    new_used = sum(checker.count_tokens(t) for t in cut.pool.texts)
    assert new_used <= 5 * BUDGET and new_used >= 0.95 * old_used, (new_used, old_used)
    assert cut.pool.task_text == searched.pool.task_text  # a task that fits is shown whole either way


def test_text_the_tokenizer_splits_inside_characters_is_cut_at_offsets_too(llama_server):
    """CJK and emoji: ids that spell half a character are decoded with their neighbours, and the cut
    still fits by the server's count."""
    words = "日本語のテキスト、東京都は日本の首都です。😀 ✅ naïve café — “quoted” │├── tree\n"
    steps = [Step("agent", f"step {i}: {words * 3}", observation=words * (20 + i), exit_code=i % 2)
             for i in range(12)]
    runs = [Candidate(id=f"u{i}", text="", trajectory=Trajectory(steps=steps[i:] + steps[:i], final_output=f"done {i}"))
            for i in range(3)]
    model = load_backend(f"{llama_server}#smollm2")
    spans = model.token_spans()
    assert isinstance(spans, TokenSpans) and spans.cuts_by_offsets()
    offsets = spans.offsets(words * 5)
    assert offsets is not None and len(offsets) == model.count_tokens(words * 5)
    renderer = Renderer.for_model(model)
    before = tokenizer_requests(model)
    texts = [renderer.candidate(c, 200) for c in runs]
    checker = load_backend(f"{llama_server}#smollm2")
    assert all(checker.count_tokens(t) <= 200 for t in texts)
    assert all("elided" in t for t in texts)
    assert tokenizer_requests(model) - before <= 8 * len(runs)


def test_a_server_without_a_tokenizer_renders_as_before():
    task, candidates = load_selection([str(POOL)])
    with FaultServer() as srv:
        srv.model_fields = {"max_model_len": 8192}
        model = load_backend(f"{srv.url}#fault-model")
        assert not model.token_spans().cuts_by_offsets()
        counted = Renderer(model.count_tokens)
        spans = Renderer.for_model(model)
        for cand in candidates[:2]:
            assert spans.candidate(cand, 300) == counted.candidate(cand, 300)


def test_select_json_usage_reports_the_tokenizer_requests(llama_server, pool, tmp_path):
    """The run's usage counts the requests of fitting and of the run (label checks)."""
    from veriscale.selection.select import select

    task, candidates = pool
    model = load_backend(f"{llama_server}#smollm2")
    verifier = Verifier(model, store=None, criteria=load_criteria("agent").only(["Output"]), scale="letters:5")
    sel = select(task, candidates[:2], verifier=verifier, budget_tokens=64, method="round_robin", adaptive=False,
                 repeats=1)
    usage = sel.usage.to_dict()
    assert usage["tokenizer_requests"] >= sel.plan.tokenizer_requests > 0
    assert usage["tokenizer_requests"] == tokenizer_requests(model)
    assert json.loads(json.dumps(sel.to_dict()))["usage"]["tokenizer_requests"] == usage["tokenizer_requests"]
