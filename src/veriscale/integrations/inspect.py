"""veriscale in Inspect AI (``pip install 'veriscale[inspect]'``): two scorers and an epoch reducer.

    from inspect_ai import Epochs, Task, task
    from veriscale.integrations.inspect import veriscale_best, veriscale_progress, veriscale_scorer

    @task
    def hello():
        return Task(dataset=[Sample(input="Say hello.")], solver=generate(),
                    scorer=[veriscale_scorer(criteria="general"), veriscale_progress()],
                    epochs=Epochs(5, veriscale_best()))        # inspect eval --epochs 5: Best-of-5

- :func:`veriscale_scorer` (:mod:`.inspect_scorer`): the fine-grained reward as the Score's value,
  per-criterion rewards and label distributions in its metadata, the store run of its model calls;
- :func:`veriscale_progress` (:mod:`.inspect_scorer`): the progress curve of the message history
  and its VOC;
- :func:`veriscale_best` (:mod:`.inspect_reducer`): keeps the epoch the verifier prefers.

Importing this module without Inspect AI raises one sentence naming the extra to install.
"""

from __future__ import annotations

from veriscale.integrations.inspect_reducer import veriscale_best
from veriscale.integrations.inspect_scorer import NO_OUTPUT, veriscale_progress, veriscale_scorer

__all__ = ["NO_OUTPUT", "veriscale_best", "veriscale_progress", "veriscale_scorer"]
