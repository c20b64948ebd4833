"""The tournaments' judge over a rendered pool, answered by a Verifier on the caller's loop.

    judge = VerifierJudge(verifier, plan.pool)
    await judge.acompare(0, 3, 1)   # PairVerdict(p=P(0 beats 3), rewards={"Output": (r0, r3), ...}); 3 shown first
    await judge.ascore(2)           # ScoreVerdict(reward, rewards={"Output": r2, ...})  (pointwise)

``judge.acompare(i, j, repeat)`` is ``await verifier.acompare(task, text_i, text_j, only_repeat=repeat)``:
candidate ``i`` sits in slot A on even repeats. A comparison whose verdict failed (a model call
failed after the backend's own retries, or the model put no probability on any score label)
raises ``SelectionFailed`` naming the pair and the errors; it is never counted as a tie.
Finished calls are in the store, so a rerun resumes and retries only what failed.

The async tournaments take these forms (the verifier is a
:class:`veriscale.selection.verifier_seam.SelectionVerifier`)::

    result = await appt(n, judge.acompare, k=2)     # judge.acompare(i, j, repeat) -> PairVerdict
    result = await apointwise(n, judge.ascore)
"""

from __future__ import annotations

from typing import Any

from veriscale.errors import ModelCallError
from veriscale.selection.core.judging import PairVerdict, ScoreVerdict
from veriscale.selection.rendering import RenderedPool
from veriscale.selection.verifier_seam import SelectionVerifier


class SelectionFailed(ModelCallError):
    """A comparison had no verdict, so the selection stopped instead of guessing."""


class VerifierJudge:
    """``acompare(i, j, repeat)`` and ``ascore(i)`` for the tournaments; counts verdicts with low label mass."""

    def __init__(self, verifier: SelectionVerifier, pool: RenderedPool, progress: Any = None) -> None:
        self.verifier = verifier
        self.pool = pool
        self.progress = progress  # called once per finished model call
        self.verdicts = 0
        self.low_label_mass = 0  # verdicts where the model put little probability on the labels

    async def acompare(self, i: int, j: int, repeat: int) -> PairVerdict:
        """P(i beats j) from one repeat of ``verifier.acompare`` (i in slot A on even repeats)."""
        pool = self.pool
        result = await self.verifier.acompare(pool.task_text, pool.texts[i], pool.texts[j], only_repeat=repeat,
                                              **self._progress(), **self._images(i, j))
        return self._pair_verdict(result, i, j)

    async def ascore(self, i: int) -> ScoreVerdict:
        """Candidate i's reward from ``verifier.ascore`` (for ``apointwise``)."""
        pool = self.pool
        return self._score_verdict(await self.verifier.ascore(pool.task_text, pool.texts[i], **self._progress(),
                                                              **self._images(i)), i)

    def _pair_verdict(self, result: Any, i: int, j: int) -> PairVerdict:
        pool = self.pool
        if result.failed or result.p_a_wins is None:
            raise SelectionFailed(
                f"comparing {pool.candidates[i].id} with {pool.candidates[j].id} gave no verdict "
                f"({'; '.join(result.errors[:3]) or 'no score on some criterion'}): the selection stopped "
                "rather than count it as a tie; finished calls are saved, so rerun to retry the failed ones"
            )
        self._count(result)
        return PairVerdict(result.p_a_wins, result.criterion_rewards(),
                           tuple(dict.fromkeys(r.call_key for r in result.readings if r.call_key)))

    def _score_verdict(self, result: Any, i: int) -> ScoreVerdict:
        if result.failed or result.reward is None:
            raise SelectionFailed(
                f"scoring {self.pool.candidates[i].id} gave no verdict ({'; '.join(result.errors[:3]) or 'no score'}): "
                "the selection stopped; finished calls are saved, so rerun to retry the failed ones"
            )
        self._count(result)
        return ScoreVerdict(result.reward, result.criterion_rewards())

    def _images(self, *indices: int) -> dict[str, Any]:
        """The ``images`` keyword where the pool has images (a text pool calls the verifier as it always did)."""
        images = self.pool.images_of(*indices)
        return {"images": images} if images else {}

    def _progress(self) -> dict[str, Any]:
        return {"progress": self.progress} if self.progress is not None else {}

    def _count(self, result: Any) -> None:
        self.verdicts += 1
        self.low_label_mass += bool(result.low_label_mass)
