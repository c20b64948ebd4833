"""One async stack: a selection's model calls are awaited on the caller's own event loop.

Two ``aselect`` on one loop overlap their model calls (each waits inside the model until the
other has a call in flight too), every call runs on the caller's loop and thread, and the sync
``select`` gives the same pick as ``aselect`` with no loop left behind.
"""

from __future__ import annotations

import asyncio
import threading

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.data.model import Candidate, Task
from veriscale.selection.select import aselect, select
from veriscale.verify.reward import Verifier

GUARD_S = 600  # a hang guard only: every wait ends on an event


class OverlapWitnessModel(ScriptedScoreModel):
    """TEST DOUBLE: the scripted model, awaited natively; each call records where it ran and, until
    both selections have had a call in flight at once, waits for that to happen."""

    concurrency = 64  # slots for every call of both selections: a full endpoint would hold the other back

    def __init__(self) -> None:
        super().__init__()
        self.in_flight: dict[str, int] = {"alpha": 0, "beta": 0}
        self.both: asyncio.Event | None = None
        self.where: set[tuple[int, int]] = set()  # (id of the running loop, thread ident) of every call

    async def ascore(self, request):
        if self.both is None:
            self.both = asyncio.Event()
        text = request.messages[-1].content
        task = "alpha" if "ALPHA-TASK" in text else "beta"
        self.where.add((id(asyncio.get_running_loop()), threading.get_ident()))
        self.in_flight[task] += 1
        try:
            if all(self.in_flight.values()):
                self.both.set()
            await asyncio.wait_for(self.both.wait(), GUARD_S)  # a hang guard only: a sequential run never gets here
            return self.score(request)
        finally:
            self.in_flight[task] -= 1


def _pool(tag: str) -> list[Candidate]:
    return [Candidate(id=f"{tag}-{i}", text=f"{tag} answer {i}" + (" GOOD" if i == 2 else "")) for i in range(4)]


def test_two_aselect_on_one_loop_overlap_their_model_calls_on_that_loop() -> None:
    model = OverlapWitnessModel()
    verifier = Verifier(model, criteria="general")

    async def both() -> tuple[object, object, tuple[int, int]]:
        here = (id(asyncio.get_running_loop()), threading.get_ident())
        first, second = await asyncio.gather(
            aselect(Task("ALPHA-TASK: say hi"), _pool("alpha"), verifier=verifier, method="round_robin"),
            aselect(Task("BETA-TASK: say bye"), _pool("beta"), verifier=verifier, method="round_robin"))
        return first, second, here

    first, second, here = asyncio.run(both())
    assert model.both is not None and model.both.is_set()  # a call of each selection was in flight at once
    assert model.where == {here}  # every model call ran on the caller's loop, in the caller's thread
    assert first.best.id == "alpha-2" and second.best.id == "beta-2"
    # each selection counts its own calls, not the other's that ran on the same gateway meanwhile
    # (both pools have the same shape, so each spent half; counted from a snapshot, each saw both)
    assert first.usage.model_calls == second.usage.model_calls == verifier.usage.model_calls // 2 > 0


def test_select_from_sync_code_gives_the_pick_aselect_gives() -> None:
    verifier = Verifier(ScriptedScoreModel(), criteria="general")
    pool = [Candidate(id=f"run-{i}", text=f"answer {i}" + (" GOOD" if i == 1 else "")) for i in range(3)]
    synced = select(Task("say hi"), pool, verifier=verifier, method="round_robin")
    awaited = asyncio.run(aselect(Task("say hi"), pool, verifier=verifier, method="round_robin"))
    assert synced.best.id == awaited.best.id == "run-1"
    assert synced.scores == awaited.scores and synced.n_judgements == awaited.n_judgements


class OneCallAtATimeModel(ScriptedScoreModel):
    """TEST DOUBLE: the scripted model standing for the embedded one (one call at a time, a KV cache
    that reuses the prefix consecutive prompts share); records which candidates each prompt shows."""

    is_embedded = True

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[frozenset[str]] = []

    def score(self, request):
        text = request.messages[-1].content
        self.shown.append(frozenset(f"answer {i}" for i in range(5) if f"answer {i}" in text))
        return super().score(request)


def test_a_one_call_at_a_time_model_gets_each_judgements_calls_in_a_row() -> None:
    """Concurrent rounds would interleave the comparisons' calls and lose the embedded model's prefix
    reuse (the README job ran 3.7x slower so); its judgements are awaited in schedule order instead."""
    model = OneCallAtATimeModel()
    pool = [Candidate(id=f"run-{i}", text=f"answer {i}" + (" GOOD" if i == 3 else "")) for i in range(5)]
    sel = select(Task("say hi"), pool, verifier=Verifier(model, criteria="general"), method="ppt", k=2,
                 adaptive=False)
    runs = 1 + sum(1 for before, after in zip(model.shown, model.shown[1:]) if before != after)
    assert sel.best.id == "run-3" and len(model.shown) == sel.usage.model_calls > sel.n_judgements
    assert runs <= sel.n_judgements  # each judgement's calls came one after another
