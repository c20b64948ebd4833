"""Prompt tokens a server processes for separate vs joint scoring, on held-out Terminal-Bench pools
at the default render budget (not a short candidate budget).

    python3 benchmarks/bench_joint_tokens.py                     # 10 seeded disagreeing pools, PPT k=2
    python3 benchmarks/bench_joint_tokens.py --pools 20 --json out.json

No model runs: a stand-in backend renders every request with the embedded GGUF's tokenizer and chat
template and counts the prompt tokens two kinds of server cache would process:

- **one slot** (``llama_cpp.server``, a one-slot ``llama-server``): only the previous prompt's
  KV cache is kept, so a request processes what follows its common prefix with the request
  before it;
- **prefix cache** (vLLM's automatic prefix caching, SGLang's radix cache): a request processes
  what follows its longest common prefix with any earlier request (token-exact, as SGLang; vLLM
  shares whole 16-token blocks, a few tokens more per request).

A joint request is one prompt; the grades and headers after its first slot are generated under
the server's grammar (counted apart as ``forced_tokens``). Every slot answers a flat distribution,
so every comparison is a tie and the non-adaptive schedule is the same for both modes: the
figures compare prompts, not verdicts. The pools are drawn with a seed from
``terminal_bench_2.1_trials.jsonl.gz`` (those whose runs disagree); the bundled example pool is
not among them.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from _common import dev_file  # noqa: E402
from veriscale.bench.datasets import load_labelled_pools, sample  # noqa: E402
from veriscale.engine.store import Store  # noqa: E402
from veriscale.models.base import ScoreResponse  # noqa: E402
from veriscale.models.chat_template import render_chat  # noqa: E402
from veriscale.models.embedded import EmbeddedModel  # noqa: E402
from veriscale.selection.select import select  # noqa: E402
from veriscale.verify.reward import Verifier  # noqa: E402



def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class CacheCounter:
    """Stand-in backend (joint-capable): counts processed prompt tokens under both cache models."""

    is_embedded = True

    def supports_joint(self) -> bool:
        return True

    def __init__(self, model: EmbeddedModel) -> None:
        self.model = model
        self.uri = "cache-counter"
        self.display_name = "cache counter"
        self.calls = 0
        self.sent = 0
        self.one_slot = 0
        self.prefix_cache = 0
        self.forced = 0
        self._previous: list[int] = []
        self._seen: list[list[int]] = []

    def fingerprint(self) -> str:
        return "cache-counter:" + self.model.fingerprint()

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    def context_size(self) -> int:
        return self.model.context_size()

    def single_token_labels(self, labels):
        return []

    def _tokens(self, text: str) -> list[int]:
        return self.model._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def score(self, request) -> ScoreResponse:
        tokens = self._tokens(render_chat(self.model.template, request.messages, request.prefill))
        self.calls += 1
        self.sent += len(tokens)
        self.one_slot += len(tokens) - common_prefix(self._previous, tokens)
        self.prefix_cache += len(tokens) - max((common_prefix(s, tokens) for s in self._seen), default=0)
        self._previous = tokens
        self._seen.append(tokens)
        flat = {lab: 1.0 / len(request.labels) for lab in request.labels}
        slots = []
        if request.joint:
            written = request.labels[0]
            self.forced += sum(len(self._tokens(f" {written}{h}")) for h in request.joint)
            slots = [{"label_probs": dict(flat), "label_mass": 1.0, "unseen_mass": 0.0, "written": written,
                      "problem": None} for _ in range(len(request.joint) + 1)]
        return ScoreResponse(label_probs=flat, label_mass=1.0, prompt_tokens=len(tokens),
                             prompt_tokens_total=len(tokens), slots=slots, strategy="exact", prefilled=True)


def run(pools, model: EmbeddedModel, joint: bool, k: int, criteria: str) -> dict:
    counter = CacheCounter(model)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "store.sqlite3")
        verifier = Verifier(counter, store=store, criteria=criteria, joint=joint)
        for p in pools:
            select(p.task, p.candidates, verifier=verifier, method="ppt", k=k, adaptive=False)
        store.close()
    return {"mode": "joint" if joint else "separate", "calls": counter.calls, "sent_tokens": counter.sent,
            "processed_one_slot": counter.one_slot, "processed_prefix_cache": counter.prefix_cache,
            "forced_tokens": counter.forced}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--criteria", default="agent")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    pools = [p for p in load_labelled_pools([dev_file("terminal_bench_2.1_trials.jsonl.gz")]) if p.disagrees]
    chosen = sample(pools, args.pools, args.seed)
    model = EmbeddedModel.load()
    rows = [run(chosen, model, joint, args.k, args.criteria) for joint in (False, True)]
    sep, joint = rows
    out = {"pools": len(chosen), "candidates": sum(len(p.candidates) for p in chosen), "k": args.k,
           "criteria": args.criteria, "rows": rows,
           "joint_over_separate": {key: round(joint[key] / sep[key], 3) for key in
                                   ("calls", "sent_tokens", "processed_one_slot", "processed_prefix_cache")}}
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
