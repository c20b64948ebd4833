"""veriscale: fine-grained verification of AI agent runs.

    from veriscale import Verifier, load_backend
    v = Verifier(load_backend("embedded"))
    v.compare(task, a, b).p_a_wins
"""

from veriscale.models.uri import load_backend
from veriscale.verify.reward import Verifier

__all__ = ["Verifier", "load_backend"]
__version__ = "0.1.0"
