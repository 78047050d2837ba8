"""``cairn mcp``: serve the progress tools to an agent over MCP on stdio."""

from __future__ import annotations

from cairn.cli.parsing import Parser, workspace


def mcp(parser: Parser) -> None:
    """Serve cairn's progress tools (task_done, catchup, wip_save, …) over MCP on stdio."""
    workspace(parser)
    args = parser.parse()
    from cairn.integrations.mcp_server import serve

    serve(args.workspace)
