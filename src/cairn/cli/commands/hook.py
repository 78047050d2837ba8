"""``cairn hook claude …``: the hooks Claude Code calls (``cairn.cli.handlers.hook``)."""

from __future__ import annotations

from cairn.cli.parsing import Parser


def post_tool_use(parser: Parser) -> None:
    """Read the hook payload on stdin; print the wrap-up directive when the budget runs low."""
    parser.parse()
    from cairn.cli.handlers import hook

    hook.post_tool_use()


def session_start(parser: Parser) -> None:
    """SessionStart: catch-up context for Claude when the branch's ticket was interrupted."""
    parser.parse()
    from cairn.cli.handlers import hook

    hook.session_start()


def snapshot(parser: Parser) -> None:
    """PreCompact, Stop, SessionEnd: snapshot uncommitted work; prints nothing, never blocks."""
    parser.add_argument("--reason", help="Recorded as 'claude <reason>' (default: the hook event).")
    args = parser.parse()
    from cairn.cli.handlers import hook

    hook.snapshot(**vars(args))


def heartbeat(parser: Parser) -> None:
    """PostToolUse: move the branch ticket's marker's last_updated to now, if it has one."""
    parser.parse()
    from cairn.cli.handlers import hook

    hook.heartbeat()
