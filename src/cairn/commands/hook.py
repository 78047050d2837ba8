"""``cairn hook claude post-tool-use``: called by Claude Code, never by people."""

from __future__ import annotations

import json
import os
import sys

import typer

app = typer.Typer(help="Hooks that agents call (Claude Code).", no_args_is_help=True)
claude = typer.Typer(help="Claude Code command hooks.", no_args_is_help=True)
app.add_typer(claude, name="claude")


@claude.command("post-tool-use")
def post_tool_use() -> None:
    """Read the hook payload on stdin; print the wrap-up directive when the budget runs low."""
    from cairn.integrations.claude_hooks import post_tool_use as answer

    try:
        payload = json.loads(sys.stdin.read() or "{}")
        reply = answer(payload if isinstance(payload, dict) else {}, os.environ)
    except Exception:  # a hook must never break the agent's loop
        reply = None
    if reply is not None:
        sys.stdout.write(json.dumps(reply) + "\n")
