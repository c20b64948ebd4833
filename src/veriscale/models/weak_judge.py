"""Saying so when the judge is the embedded SmolLM2-135M: the CLI prints :data:`EMBEDDED_NOTICE`
once, the Python API warns with :class:`WeakJudgeWarning` (filter it like any warning)::

    uses_embedded(backend)          # True for the embedded model, also inside a two-stage backend
    warn_if_embedded(backend)       # the warning, from the caller's line

    import warnings; warnings.simplefilter("ignore", WeakJudgeWarning)   # you know it is a toy judge
"""

from __future__ import annotations

import warnings
from typing import Any

from veriscale.errors import setting, worded

EMBEDDED_NOTICE = worded(
    "Using the embedded SmolLM2-135M model: a small offline model for trying veriscale, "
    f"not a reliable judge. For real verification choose another {setting('model')} (e.g. "
    f"{setting('model', 'http://127.0.0.1:8000/v1#your-model')} or {setting('model', 'openai:gpt-4.1-mini')})."
)


class WeakJudgeWarning(UserWarning):
    """A verdict is about to come from the embedded 135M model, a weak judge."""


def uses_embedded(backend: Any) -> bool:
    """Whether ``backend`` is (or, for a two-stage backend, contains) the embedded model."""
    if getattr(backend, "is_embedded", False):
        return True
    return any(uses_embedded(getattr(backend, part)) for part in ("reasoner", "scorer") if hasattr(backend, part))


def warn_if_embedded(backend: Any, *, stacklevel: int = 3) -> None:
    """Warn (:class:`WeakJudgeWarning`, shown once per calling line by Python's default filter)
    when ``backend`` uses the embedded model; the message names the model to use instead."""
    if uses_embedded(backend):
        warnings.warn(EMBEDDED_NOTICE, WeakJudgeWarning, stacklevel=stacklevel)
