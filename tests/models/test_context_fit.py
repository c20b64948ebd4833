"""Context fit: overflow replies are read, the token estimate keeps its stated margin on code and
CJK text, and the render budget fits a pair prompt into the context a server reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer
from veriscale.data.model import Candidate, Task
from veriscale.errors import UserError
from veriscale.models.context import Overflow, estimate_tokens, read_overflow
from veriscale.models.uri import load_backend
from veriscale.selection.plan import plan_selection
from veriscale.selection.prompt_fit import fit_prompt
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

REPO = Path(__file__).resolve().parents[2]
CODE = (REPO / "src/veriscale/models/openai_compat.py").read_text(encoding="utf-8")
CJK = ("这是一个测试。我们需要确认分词器对中文的处理方式是否符合预期，包括标点符号和数字。"
       "日本語のテキストも含めます：東京都は日本の首都です。한국어 문장도 있습니다。") * 30

# the reply of a real llama_cpp.server 0.3.36 started with --n_ctx 8192 (tests/integration checks it live)
LLAMA_CPP_SERVER = json.dumps({"error": {
    "message": "This model's maximum context length is 8192 tokens. However, you requested 9032 tokens (9031 in "
               "the messages, 1 in the completion). Please reduce the length of the messages or completion.",
    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})


@pytest.mark.parametrize("status,body,expected", [
    (400, LLAMA_CPP_SERVER, Overflow(8192, 9032)),
    (400, '{"error": {"message": "Requested tokens (9031) exceed context window of 8192"}}', Overflow(8192, 9031)),
    (400, json.dumps({"object": "error", "message": "This model's maximum context length is 4096 tokens. However, "
                      "you requested 5000 tokens (4999 in the messages, 1 in the completion).", "code": 400}),
     Overflow(4096, 5000)),  # vLLM
    (400, json.dumps({"error": {"code": 400, "message": "the request exceeds the available context size, try "
                      "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 8192}}),
     Overflow(8192, 9000)),  # the C++ llama-server
    (400, '{"error": {"message": "Your input exceeds the context window of this model.", '
          '"code": "context_length_exceeded"}}', Overflow(None, None)),  # OpenAI, no number
    (400, '{"error": {"message": "max_tokens must be at least 1"}}', None),
    (500, LLAMA_CPP_SERVER, None),
])
def test_overflow_replies_are_read(status, body, expected):
    assert read_overflow(status, body) == expected


@pytest.mark.embedded
@pytest.mark.parametrize("name,text", [("code", CODE), ("cjk", CJK), ("code and cjk", CODE[:3000] + CJK)])
def test_the_estimate_keeps_its_margin_over_the_real_tokenizer(embedded_model, name, text):
    real = embedded_model.count_tokens(text)
    assert real <= estimate_tokens(text) <= 2 * real, name


def _verifier(uri: str) -> Verifier:
    return Verifier(load_backend(uri), store=None, criteria=load_criteria("general").only(["Correctness"]),
                    scale="letters:5")


@pytest.mark.parametrize("text", [CODE * 3, CJK * 8])
def test_the_default_budget_fits_a_pair_prompt_into_the_reported_context(text):
    with FaultServer() as srv:
        srv.model_fields = {"max_model_len": 4096}
        verifier = _verifier(f"{srv.url}#fault-model")
        fit = fit_prompt(verifier, Task(text="Review this."), pairwise=True)
        assert fit.overhead_tokens + 2 * fit.budget_tokens <= 4096
        plan = plan_selection(Task(text="Review this."), [Candidate(id="a", text=text), Candidate(id="b", text=text + "!")],
                              verifier=verifier)
        shown = sum(estimate_tokens(t) for t in plan.pool.texts)  # this server has no tokenizer: the estimate counts
        assert plan.budget_tokens == fit.budget_tokens and fit.overhead_tokens + shown <= 4096


def test_an_explicit_budget_that_cannot_fit_names_the_setting():
    with FaultServer() as srv:
        srv.model_fields = {"max_model_len": 4096}
        with pytest.raises(UserError, match=r"budget_tokens 6000 does not fit the model's 4096-token context .*use at most \d+"):
            fit_prompt(_verifier(f"{srv.url}#fault-model"), Task(text="Review this."), 6000, pairwise=True)


def test_select_refits_once_to_the_context_an_overflow_names():
    from veriscale.selection.select import select

    with FaultServer() as srv:
        srv.queue("context")  # the first prompt is refused: "... exceed context window of 8192"
        verifier = _verifier(f"{srv.url}?retries=0#fault-model")
        cands = [Candidate(id="a", text="x " * 20000), Candidate(id="b", text="y " * 20000)]
        sel = select(Task(text="Review this."), cands, verifier=verifier, adaptive=False)
        assert sel.plan.budget_tokens < 4096 and verifier.model.context_size() == 8192
        assert any("overflowed the model's 8192-token context" in n for n in sel.notes)
        calls = sel.plan.calls_per_judgement  # one comparison of two candidates
        srv.queue(*["context"] * 2 * calls)  # still too long after the refit: one sentence, no third plan
        before = len(srv.requests)
        more = [Candidate(id="c", text="z " * 20000), Candidate(id="d", text="w " * 20000)]
        with pytest.raises(UserError, match="longer than the 8192-token context"):
            select(Task(text="Review this."), more, verifier=verifier, adaptive=False)
        assert len(srv.requests) - before <= 2 * calls  # two plans at most


def test_track_refits_once_to_the_context_an_overflow_names():
    from veriscale.data.model import Step
    from veriscale.progress import ProgressJudge, track

    long_steps = [Step(role="agent", text=f"step {i} " + "word " * 600) for i in range(40)]
    with FaultServer() as srv:
        srv.queue("context")  # the first prompt is refused: "... exceed context window of 8192"
        judge = ProgressJudge(load_backend(f"{srv.url}?retries=0#fault-model"), scale="letters:5")
        curve = track("Follow the run.", long_steps, [10, 40], judge=judge)
        assert judge.model.context_size() == 8192
        assert any("overflowed the model's 8192-token context: the steps' budget" in n for n in curve.notes)
        assert [p.step for p in curve.points] == [10, 40] and all(p.error is None for p in curve.points)
        # the refitted prompts fit: estimated tokens of the last prompt stay under the context
        last = srv.requests[-1]["body"]
        assert judge.count_tokens(json.dumps(last["messages"])) < 8192
        srv.queue(*["context"] * 4)  # still refused after the refit: one sentence, no third plan
        before = len(srv.requests)
        with pytest.raises(UserError, match="longer than the 8192-token context"):
            track("Follow the run again.", long_steps, [10, 40], judge=judge)
        assert len(srv.requests) - before <= 4


def test_bench_pairs_refit_once_to_the_context_an_overflow_names(tmp_path):
    from veriscale.bench.configs import BenchConfig
    from veriscale.bench.datasets import LabelledPair
    from veriscale.bench.bench_runner import Bench
    from veriscale.engine.store import Store

    pairs = [LabelledPair(id="p1", instruction="Review this.", output_1="x " * 20000, output_2="y " * 20000, label=1)]
    store = Store.open(tmp_path / "s.sqlite3")
    with FaultServer() as srv:
        srv.queue("context")
        bench = Bench(load_backend(f"{srv.url}?retries=0#fault-model"), store,
                      criteria=load_criteria("general").only(["Correctness"]))
        rows = bench.run_pairs(pairs, [BenchConfig(g=5)])
        assert bench.model.context_size() == 8192
        assert any("overflowed the model's 8192-token context: every render budget" in n for n in bench.notes)
        assert rows[0].metrics["failed"] == 0, rows[0].metrics
    store.close()
