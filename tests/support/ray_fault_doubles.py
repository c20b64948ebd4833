"""TEST DOUBLES for faults of a Ray worker, registered in each worker by :func:`register_in_worker`.

- ``memhog:``: the scripted scoring double whose every call raises ``MemoryError`` in the worker
  (the worker's decision ends there, as one out of memory does; Ray's own OOM kill reaches the
  driver as a ``RayError`` and takes the same path, a lost worker).
"""

from __future__ import annotations

from tests.support.scripted_model import ScriptedScoreModel


class MemoryHogModel(ScriptedScoreModel):
    """TEST DOUBLE: the scripted model whose calls run the worker out of memory."""

    def score(self, request):
        raise MemoryError("the worker ran out of memory (test double)")


def register_in_worker() -> None:
    from tests.support import ray_doubles
    from veriscale.models.registry import register_backend

    ray_doubles.register_in_worker()
    register_backend(("memhog",), lambda uri: MemoryHogModel(), forms=("memhog:",))
