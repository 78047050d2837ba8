"""``cairn mcp``: serve the progress tools to an agent over MCP on stdio."""

from __future__ import annotations

from pathlib import Path

from cairn.cli.commands.options import Workspace
from cairn.cli.output import guarded


@guarded
def mcp(workspace: Workspace = Path(".")) -> None:
    """Serve cairn's progress tools (task_done, catchup, wip_save, …) over MCP on stdio."""
    from cairn.integrations.mcp_server import serve

    serve(workspace)
