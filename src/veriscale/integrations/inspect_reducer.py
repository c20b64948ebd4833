"""An Inspect AI epoch reducer that keeps the epoch the verifier prefers: ``--epochs N`` as Best-of-N.

    from inspect_ai import Epochs, Task
    from veriscale.integrations.inspect import veriscale_best, veriscale_scorer
    Task(..., scorer=veriscale_scorer(), epochs=Epochs(5, veriscale_best()))

Inspect hands a reducer one sample's Scores, one per epoch. ``veriscale_best`` reads each epoch's
output from ``Score.answer`` (the task from the metadata ``veriscale_scorer`` leaves) and runs
veriscale's Best-of-N selection over the distinct outputs: every pair judged (round robin) up to
``ppt_above`` outputs, PPT above that (or with a ``budget``). The reduced Score is the picked
epoch's own Score (its value, answer, explanation), with ``metadata["veriscale_pick"]``: the epoch,
the selection's confidence and method, and the ``store`` and ``run_id`` of the recorded ``select``
run. Epochs that are unscored (no output, failed verdict) take no part; one distinct output is
kept without a model call. Inspect applies the task's reducer to every scorer: the Scores of other
scorers (``veriscale_progress``, any Score without veriscale's task metadata) are averaged, as
Inspect's ``mean`` reducer does.

Inspect calls reducers synchronously, from inside its event loop, and more than once (for the
live metrics display and for the final results): the selection runs to its end on a worker thread
with its own loop (the eval waits for it), and a pick is remembered for the same outputs, so a
repeated call records no second run. The display's calls while epochs are still running may pick
among the epochs done so far; pass ``score_display=False`` to ``eval`` to skip those.
"""

from __future__ import annotations

import concurrent.futures
import math
from collections import OrderedDict
from typing import Any

from veriscale.integrations import require_inspect

require_inspect()

from inspect_ai.scorer import Score, ScoreReducer, mean_score, score_reducer  # noqa: E402

from veriscale.integrations.inspect_scorer import opened  # noqa: E402

#: how many picks are remembered (by outputs and settings), so Inspect's repeated calls cost nothing
REMEMBERED = 512
_PICKS: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()


def _scored(score: Score) -> bool:
    value = score.value
    return bool(score.answer) and not (isinstance(value, float) and math.isnan(value))


async def _select(task: str, outputs: list[str], names: list[str], options: dict[str, Any]) -> dict[str, Any]:
    from veriscale.data.model import Candidate, Task
    from veriscale.selection.select import aselect
    from veriscale.selection.settings import SelectionSettings

    n = len(outputs)
    method = "ppt" if options["budget"] is not None or n > options["ppt_above"] else "round_robin"
    async with opened(options["model"], options["store"], "select",
                      {"candidates": n, "method": method, "criteria": options["criteria"]}) as (backend, st, run):
        chosen = SelectionSettings(method=method, criteria=options["criteria"], scale=options["scale"],
                                   repeats=options["repeats"], budget=options["budget"])
        verifier = chosen.verifier(backend, store=st)
        candidates = [Candidate(id=name, text=text) for name, text in zip(names, outputs)]
        selection = await aselect(Task(task), candidates, verifier=verifier, settings=chosen)
        payload = selection.to_dict()
        run.finish("ok", payload)
    return {"index": selection.index, "confidence": selection.confidence, "method": method,
            "reason": (payload.get("reason") or {}).get("text"), "store": str(st.path), "run_id": run.id}


def _in_worker(task: str, outputs: list[str], names: list[str], options: dict[str, Any]) -> dict[str, Any]:
    """The selection run to its end on a worker thread with its own loop (Inspect's loop is running here)."""
    from veriscale.engine import sync_edge

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="veriscale-inspect-reducer") as pool:
        return pool.submit(sync_edge.run, _select(task, outputs, names, options)).result()


@score_reducer(name="veriscale_best")
def veriscale_best(criteria: str | None = None, scale: str | None = None, repeats: int | None = None,
                   model: str | None = None, budget: str | None = None, store: str | None = None,
                   ppt_above: int = 4) -> ScoreReducer:
    """Keep the epoch whose output the verifier prefers (module docstring). ``criteria``, ``scale``,
    ``model`` and ``store`` default to what the epochs' ``veriscale_scorer`` Scores say; ``budget``:
    the selection's (e.g. "calls=60"); ``ppt_above``: more distinct outputs than this go to PPT."""

    by_mean = mean_score()

    def reduce(scores: list[Score]) -> Score:
        if not any((s.metadata or {}).get("task") for s in scores):  # another scorer's (veriscale_progress): mean
            return by_mean(scores)
        scored = [s for s in scores if _scored(s)]
        if not scored:
            return scores[0] if scores else Score.unscored(explanation="no epoch has an output to choose from")
        scored.sort(key=lambda s: (s.metadata or {}).get("epoch") or 0)  # Inspect passes them as they finished
        firsts: dict[str, Score] = {}
        for s in scored:
            firsts.setdefault(s.answer or "", s)  # each distinct output's first epoch, in epoch order
        outputs = list(firsts)
        meta = scored[0].metadata or {}
        given = meta.get("settings") or {}  # what veriscale_scorer was given
        options = {"criteria": criteria or given.get("criteria") or "general",
                   "scale": scale or given.get("scale") or "letters", "repeats": repeats,
                   "model": model or given.get("model"), "store": store or meta.get("store"),
                   "budget": budget, "ppt_above": ppt_above}
        pick: dict[str, Any]
        if len(outputs) == 1:
            pick = {"index": 0, "confidence": 1.0, "method": None, "store": None, "run_id": None,
                    "note": "every epoch gave the same output"}
        else:
            task = str(meta.get("task"))
            key = (task, tuple(outputs), tuple(sorted((k, str(v)) for k, v in options.items())))
            names = [f"epoch{(firsts[a].metadata or {}).get('epoch') or i + 1}" for i, a in enumerate(outputs)]
            pick = _PICKS.get(key) or _in_worker(task, outputs, names, options)
            _PICKS[key] = pick
            _PICKS.move_to_end(key)
            while len(_PICKS) > REMEMBERED:
                _PICKS.popitem(last=False)
        best = firsts[outputs[pick["index"]]]
        epoch = (best.metadata or {}).get("epoch") or scored.index(best) + 1
        return best.model_copy(update={"metadata": {**(best.metadata or {}),
                                                    "veriscale_pick": {**pick, "epoch": epoch,
                                                                       "epochs": len(scores),
                                                                       "distinct_outputs": len(outputs)}}})

    return reduce
