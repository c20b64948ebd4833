"""What the images of a pool cost in a judge prompt, and the text budget they leave.

Each image counts as the prompt tokens ``models check`` measured for the model (its probe is cached
in the store), else as an estimate (``vision_probe.DEFAULT_IMAGE_TOKENS``), and the plan says which.
The task's images join the prompt's overhead; each candidate's images come out of the room its
text may take, so a pair of ten-frame runs still fits the context::

    cost = ImageCost.of(verifier, task_images, images, fit, pairwise=True)   # None: no images
    cost.budget_tokens, cost.candidate_tokens[i], cost.note
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from veriscale.data.render import MIN_BUDGET_TOKENS
from veriscale.errors import UserError, setting

if TYPE_CHECKING:
    from veriscale.data.images import ImagePart
    from veriscale.selection.prompt_fit import PromptFit
    from veriscale.selection.verifier_seam import SelectionVerifier


@dataclass(frozen=True)
class ImageCost:
    """Tokens per image, the task's images, each candidate's, and the text budget left per candidate."""

    per_image: int
    measured: bool
    task_tokens: int
    candidate_tokens: tuple[int, ...]
    budget_tokens: int
    note: str

    @classmethod
    def of(cls, verifier: SelectionVerifier, task_images: Sequence[ImagePart],
           images: Sequence[Sequence[ImagePart]], fit: PromptFit, *, pairwise: bool) -> ImageCost | None:
        """The cost of these images under ``fit`` (None when there are none); a pool whose frames
        leave no room for text is refused in one sentence."""
        if not task_images and not any(images):
            return None
        per_image, measured = verifier.image_tokens()
        task_tokens = len(task_images) * per_image
        each = tuple(len(imgs) * per_image for imgs in images)
        slots = 2 if pairwise else 1
        frames = sorted(each, reverse=True)[:slots]
        budget = fit.budget_tokens
        context = verifier.model.context_size()
        if isinstance(context, int) and context > 0:
            room = (context - fit.overhead_tokens - task_tokens - sum(frames)) // slots
            if room < MIN_BUDGET_TOKENS:
                raise UserError(
                    f"the images take about {task_tokens + sum(frames):,} of the model's {context:,}-token context "
                    f"({per_image} tokens each), leaving no room for the runs' text: show fewer frames "
                    f"({setting('frames')}) or smaller images ({setting('image_max_side')}), or use a model with a "
                    "larger context")
            budget = min(budget, room)
        how = "as measured by models check" if measured else \
            "an estimate: run veriscale models check MODEL to measure it"
        count = len(task_images) + sum(len(imgs) for imgs in images)
        note = f"{count} image(s) in the pool, each counted as {per_image} prompt tokens ({how})"
        return cls(per_image, measured, task_tokens, each, budget, note)


__all__ = ["ImageCost"]
