"""``cairn mcp``: serve the progress tools to an agent over MCP on stdio."""

from __future__ import annotations

from pathlib import Path

from cairn.commands.options import Workspace
from cairn.output import guarded


@guarded
def mcp(workspace: Workspace = Path(".")) -> None:
    """Serve task_start, task_done, finding_update, gate_result, progress, catchup and wip_save
    as MCP tools on stdin/stdout (for an agent's MCP config)."""
    from cairn.mcp_server import serve

    serve(workspace)
