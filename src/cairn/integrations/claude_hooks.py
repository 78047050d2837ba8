"""Claude Code command hooks. A hook must never break the agent: every failure is silent.

``post-tool-use`` brings budget pressure into Claude's own loop. ``cairn run`` passes the turn
cap in ``CAIRN_MAX_TURNS``; the hook counts the session's model turns from the transcript and,
once the turns left reach ``agent.budget_pressure_turns``, answers with the wrap-up directive as
``additionalContext``, which Claude reads before its next turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TRANSCRIPT_LIMIT = 64 * 1024 * 1024


def count_turns(transcript: Path) -> int | None:
    """Model turns in a Claude Code transcript: distinct assistant message ids."""
    try:
        if transcript.stat().st_size > TRANSCRIPT_LIMIT:
            return None
        text = transcript.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    seen: set[str] = set()
    for line in text.splitlines():
        if '"assistant"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("type") != "assistant" or entry.get("isSidechain"):
            continue
        message = entry.get("message") or {}
        ident = message.get("id") or entry.get("uuid")
        if ident:
            seen.add(str(ident))
    return len(seen)


def post_tool_use(payload: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any] | None:
    """The hook's JSON answer, or None to stay silent."""
    try:
        max_turns = int(env["CAIRN_MAX_TURNS"])
    except (KeyError, ValueError):
        return None
    workspace = Path(str(payload.get("cwd") or "."))
    try:
        pressure = int(env.get("CAIRN_PRESSURE_TURNS", "0"))
    except ValueError:
        return None
    if pressure <= 0:
        return None
    transcript = payload.get("transcript_path")
    if not transcript:
        return None
    turns = count_turns(Path(str(transcript)))
    if turns is None:
        return None
    left = max_turns - turns
    if left > pressure:
        return None
    from cairn import prompts

    text = prompts.render(
        "pressure", _toplevel(workspace), remaining_turns=max(left, 0), time_note=""
    )
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": text}}


def _toplevel(workspace: Path) -> Path | None:
    for candidate in (workspace, *workspace.parents):
        if (candidate / ".git").exists():
            return candidate
    return None
