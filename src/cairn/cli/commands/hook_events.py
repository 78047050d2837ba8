"""``cairn hook claude …``: called by Claude Code, never by people.

``post-tool-use`` is the in-loop budget hook ``cairn run`` passes to Claude. ``session-start``,
``snapshot`` and ``heartbeat`` are the hooks ``cairn hooks install claude`` writes into a settings
file for people who drive Claude Code by hand. Every one of them exits 0 and prints nothing on
stderr, whatever happens: a hook must never break the agent.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Annotated, Any

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


@claude.command("session-start")
def session_start() -> None:
    """SessionStart: catch-up context for Claude when the branch's ticket was interrupted."""
    from cairn.integrations import claude_hooks

    reply = None
    with _silent() as payload:
        if payload is not None:
            reply = claude_hooks.session_start(payload, os.environ)
    if reply is not None:
        with contextlib.suppress(Exception):
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


@claude.command("snapshot")
def snapshot(
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="Recorded as 'claude <reason>' (default: the hook event)."),
    ] = None,
) -> None:
    """PreCompact, Stop, SessionEnd: snapshot uncommitted work; prints nothing, never blocks."""
    from cairn.integrations import claude_hooks

    with _silent() as payload:
        if payload is not None:
            claude_hooks.snapshot(payload, os.environ, reason)


@claude.command("heartbeat")
def heartbeat() -> None:
    """PostToolUse: move the branch ticket's marker's last_updated to now, if it has one."""
    from cairn.integrations import claude_hooks

    with _silent() as payload:
        if payload is not None:
            claude_hooks.heartbeat(payload, os.environ)


@contextlib.contextmanager
def _silent() -> Iterator[dict[str, Any] | None]:
    """Read the payload (None when stdin holds no JSON object), swallow every failure, and
    send stray stderr output (git's, Python's) to /dev/null. ``CAIRN_DEBUG=1`` lets errors
    through."""
    debug = bool(os.environ.get("CAIRN_DEBUG"))
    if not debug:
        _mute_stderr()
    try:
        yield _payload()
    except Exception:
        if debug:
            raise


def _payload() -> dict[str, Any] | None:
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return None
        payload = json.loads(sys.stdin.buffer.read().decode("utf-8", "replace"))
    except Exception:  # unreadable stdin, not JSON, nested too deep
        return None
    return payload if isinstance(payload, dict) else None


def _mute_stderr() -> None:
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
