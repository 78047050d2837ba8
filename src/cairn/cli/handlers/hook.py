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

from cairn.envnames import ENV_DEBUG

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


def post_tool_use() -> None:
    from cairn.integrations.claude_hooks import post_tool_use as answer

    try:
        payload = json.loads(sys.stdin.read() or "{}")
        reply = answer(payload if isinstance(payload, dict) else {}, os.environ)
    except Exception:  # a hook must never break the agent's loop
        reply = None
    if reply is not None:
        sys.stdout.write(json.dumps(reply) + "\n")


def session_start() -> None:
    from cairn.integrations import claude_hooks

    reply = None
    with _silent() as payload:
        if payload is not None:
            reply = claude_hooks.session_start(payload, os.environ)
    if reply is not None:
        with contextlib.suppress(Exception):
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


def snapshot(reason: str | None = None) -> None:
    from cairn.integrations import claude_hooks

    with _silent() as payload:
        if payload is not None:
            claude_hooks.snapshot(payload, os.environ, reason)


def heartbeat() -> None:
    from cairn.integrations import claude_hooks

    with _silent() as payload:
        if payload is not None:
            claude_hooks.heartbeat(payload, os.environ)


@contextlib.contextmanager
def _silent() -> Iterator[dict[str, Any] | None]:
    """Read the payload (None when stdin holds no JSON object), swallow every failure, and
    send stray stderr output (git's, Python's) to /dev/null. ``CAIRN_DEBUG=1`` lets errors
    through."""
    debug = bool(os.environ.get(ENV_DEBUG))
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
