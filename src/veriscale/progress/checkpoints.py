"""Which prefixes to score: every step, every N-th, or the steps a user names.

    resolve_checkpoints(40)                      # [1, 2, ..., 40]
    resolve_checkpoints(40, every=10)            # [10, 20, 30, 40]
    resolve_checkpoints(40, checkpoints=[5, 20]) # [5, 20]
    parse_checkpoints("5,10,20")                 # [5, 10, 20]
"""

from __future__ import annotations

from collections.abc import Sequence

from veriscale.errors import UserError, setting


def parse_checkpoints(text: str) -> list[int]:
    """'5,10,20' as step numbers (order and range are checked by :func:`resolve_checkpoints`)."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"checkpoints '{text}' ({setting('checkpoints')}) are not whole step numbers: "
                        "give e.g. 5,10,20") from None


def resolve_checkpoints(n_steps: int, checkpoints: Sequence[int] | None = None, every: int | None = None) -> list[int]:
    """The 1-based steps to score, strictly increasing and within the trajectory."""
    if n_steps < 1:
        raise UserError("the trajectory has no steps: progress is scored on the steps an agent took, so give a run with at least one")
    if checkpoints is not None and every is not None:
        raise UserError(f"give either {setting('checkpoints')} or {setting('every')}, not both")
    if every is not None:
        if not isinstance(every, int) or every < 1:
            raise UserError(f"every {every!r} ({setting('every')}) must be a whole number of steps, 1 or more")
        chosen = list(range(every, n_steps + 1, every))
        return chosen if chosen and chosen[-1] == n_steps else [*chosen, n_steps]
    if checkpoints is None:
        return list(range(1, n_steps + 1))
    chosen = list(checkpoints)
    if not chosen:
        raise UserError(f"no checkpoints given ({setting('checkpoints')}): name at least one step, e.g. 5,10")
    for i, step in enumerate(chosen):
        if not isinstance(step, int) or isinstance(step, bool) or step < 1:
            raise UserError(f"checkpoint {step!r} is not a step number: steps count from 1")
        if step > n_steps:
            raise UserError(f"checkpoint {step} is beyond the trajectory, which has {n_steps} steps: "
                            f"give checkpoints from 1 to {n_steps}")
        if i and step == chosen[i - 1]:
            raise UserError(f"checkpoint {step} is given twice: name each step once")
        if i and step < chosen[i - 1]:
            raise UserError(f"checkpoints are out of order ({chosen[i - 1]} before {step}): give them in increasing order")
    return chosen
