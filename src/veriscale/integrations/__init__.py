"""veriscale inside other tools: the MCP server (``veriscale mcp``, :mod:`.mcp_server`, its tools in
:mod:`.mcp_tools`). Each needs an optional extra, imported only when used::

    require_mcp()        # one sentence naming pip install 'veriscale[mcp]' when the SDK is missing
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
