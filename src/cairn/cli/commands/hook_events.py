"""``cairn hook claude …``: the Typer declarations (for ``--help``); the hooks themselves are in
``cairn.cli.handlers.hook``."""

from __future__ import annotations

from typing import Annotated

import typer

from cairn.cli.handlers import hook

app = typer.Typer(help="Hooks that agents call (Claude Code).", no_args_is_help=True)
claude = typer.Typer(help="Claude Code command hooks.", no_args_is_help=True)
app.add_typer(claude, name="claude")


@claude.command("post-tool-use")
def post_tool_use() -> None:
    """Read the hook payload on stdin; print the wrap-up directive when the budget runs low."""
    hook.post_tool_use()


@claude.command("session-start")
def session_start() -> None:
    """SessionStart: catch-up context for Claude when the branch's ticket was interrupted."""
    hook.session_start()


@claude.command("snapshot")
def snapshot(
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="Recorded as 'claude <reason>' (default: the hook event)."),
    ] = None,
) -> None:
    """PreCompact, Stop, SessionEnd: snapshot uncommitted work; prints nothing, never blocks."""
    hook.snapshot(**locals())


@claude.command("heartbeat")
def heartbeat() -> None:
    """PostToolUse: move the branch ticket's marker's last_updated to now, if it has one."""
    hook.heartbeat()
