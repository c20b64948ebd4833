"""veriscale inside other tools: the MCP server (``veriscale mcp``, :mod:`.mcp_server`, its tools in
:mod:`.mcp_tools`) and Inspect AI scorers and an epoch reducer (:mod:`.inspect`, built on
:mod:`.inspect_scorer` and :mod:`.inspect_reducer`). Each needs an optional extra, imported only when used::

    require_mcp()        # one sentence naming pip install 'veriscale[mcp]' when the SDK is missing
    require_inspect()    # one sentence naming pip install 'veriscale[inspect]' when Inspect AI is missing
    require_deepeval()   # one sentence naming pip install 'veriscale[deepeval]' (the metric of :mod:`.deepeval_metric`)
"""

from __future__ import annotations

from veriscale.errors import UserError


def require_mcp() -> None:
    """Import the official ``mcp`` SDK (2.x), or say in one sentence how to install it."""
    try:
        import mcp.server.lowlevel.server  # noqa: F401
        import mcp_types  # noqa: F401
    except ImportError:
        raise UserError("veriscale mcp needs the MCP SDK (mcp 2.0 or later): pip install 'veriscale[mcp]'") from None


def require_inspect() -> None:
    """Import Inspect AI (0.3.285 or later), or say in one sentence how to install it."""
    try:
        import inspect_ai.scorer  # noqa: F401
    except ImportError:
        raise UserError("the veriscale Inspect AI scorers need Inspect AI (inspect-ai 0.3.285 or later): "
                        "pip install 'veriscale[inspect]'") from None


def require_deepeval() -> None:
    """Import DeepEval (4.3 or later), or say in one sentence how to install it."""
    try:
        import deepeval.metrics  # noqa: F401
    except ImportError:
        raise UserError("the veriscale DeepEval metric needs DeepEval (deepeval 4.3 or later): "
                        "pip install 'veriscale[deepeval]'") from None
