"""TEST DOUBLE DRIVER — one process selecting the best of four candidates on a shared store.

Run as ``python -m tests.support.select_worker STORE URL KEY LEASE_S OUT``: a round-robin
selection (6 pairs, 4 criteria, both slot orders: 96 distinct calls) against the
OpenAI-compatible server at URL, sending ``Authorization: Bearer KEY`` (so the server can tell
the processes apart), claims lapsing after LEASE_S seconds; the pick and usage go to OUT as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from veriscale.data.model import Candidate
from veriscale.engine.store import Store
from veriscale.models.openai_compat import OpenAICompatModel
from veriscale.selection.select import select
from veriscale.verify.criteria import parse_criteria
from veriscale.verify.reward import Verifier

CRITERIA = """# Four criteria

## Correctness
The answer is right.

## Instruction following
The answer does what was asked.

## Completeness
The answer covers every part.

## Clarity
The answer is easy to read.
"""


def main(store_path: str, url: str, key: str, lease_s: str, out: str) -> None:
    store = Store.open(store_path)
    model = OpenAICompatModel(url, model="fault-model", api_key=key, backoff_s=0.01)
    verifier = Verifier(model, store=store, criteria=parse_criteria(CRITERIA, "four"), concurrency=2)
    verifier.executor.gateway.lease_s = float(lease_s)
    candidates = [Candidate(id=name, text=f"answer {name}") for name in "abcd"]
    sel = select("Say which answer is best.", candidates, verifier=verifier, method="round_robin", adaptive=False)
    Path(out).write_text(json.dumps({"best": sel.best.id, "scores": list(sel.scores),
                                     "usage": sel.usage.to_dict()}))
    store.close()


if __name__ == "__main__":
    main(*sys.argv[1:6])
