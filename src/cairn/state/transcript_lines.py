"""One readable line per transcript event, for ``cairn logs``: turns, tool calls with their
command or path, messages cut to one line. Knows the scripted agent's events, Claude Code's
``stream-json`` and Codex's ``exec --json``; any other event is its type and a cut of its JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from cairn.util.text import tool_target

MESSAGE_LIMIT = 160  # characters of a message or a tool's input on its line


def cut(text: Any, limit: int = MESSAGE_LIMIT) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def describe(record: dict[str, Any]) -> list[str]:
    """The lines for one event (none for bookkeeping events not worth a line)."""
    kind = str(record.get("type", "?"))
    if kind in _SCRIPTED:
        return [_SCRIPTED[kind](record)]
    if kind in ("assistant", "user"):
        return _claude_message(kind, record)
    if kind == "system":
        subtype = record.get("subtype")
        return [f"session started ({record.get('model', '?')})"] if subtype == "init" else []
    if kind == "result":
        turns = record.get("num_turns")
        denied = len(record.get("permission_denials") or [])
        tail = f", {denied} tool calls denied" if denied else ""
        return [f"result: {record.get('subtype', '?')} after {turns} turns{tail}"]
    if kind.startswith(("thread.", "turn.", "item.")) or kind == "error":
        return _codex(kind, record)
    return [f"{kind}: {cut(json.dumps(record, ensure_ascii=False))}"]


def _tool(name: Any, data: Any) -> str:
    target = tool_target(data)
    return f"{name}: {cut(target)}" if target else str(name)


def _scripted_tool(record: dict[str, Any]) -> str:
    denied = " (denied)" if record.get("denied") else ""
    line = f"  tool {_tool(record.get('name'), record.get('input'))}{denied}"
    output = record.get("output")
    if isinstance(output, dict) and output.get("exit_code"):
        line += f" → exit {output['exit_code']}"
    return line


_SCRIPTED: dict[str, Callable[[dict[str, Any]], str]] = {
    "turn_started": lambda r: f"turn {r.get('turn')}",
    "turn_completed": lambda r: f"turn {r.get('turn')} done",
    "tool_use": _scripted_tool,
    "file_changed": lambda r: f"  changed {r.get('path')}",
    "message": lambda r: f"  says: {cut(r.get('text'))}",
    "plan_updated": lambda r: f"  plan: {len(r.get('items') or [])} items",
    "transcript_truncated": lambda r: f"(transcript cut at {r.get('limit')} bytes)",
    "unreadable": lambda r: f"(unreadable line: {cut(r.get('text'), 60)})",
}


def _claude_message(kind: str, record: dict[str, Any]) -> list[str]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    lines = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            lines.append(f"  says: {cut(part.get('text'))}")
        elif part.get("type") == "tool_use":
            lines.append(f"  tool {_tool(part.get('name'), part.get('input'))}")
        elif part.get("type") == "tool_result" and part.get("is_error"):
            lines.append(f"  tool error: {cut(part.get('content'))}")
    return lines


def _codex(kind: str, record: dict[str, Any]) -> list[str]:
    if kind == "turn.started":
        return ["turn"]
    if kind == "turn.completed":
        return ["turn done"]
    if kind == "turn.failed":
        error = record.get("error")
        return [f"turn failed: {cut(error.get('message') if isinstance(error, dict) else error)}"]
    if kind == "error":
        return [f"error: {cut(record.get('message') or record.get('text'))}"]
    item = record.get("item")
    if kind != "item.completed" or not isinstance(item, dict):
        return []
    what = item.get("type")
    if what == "command_execution":
        return [f"  tool exec: {cut(item.get('command'))} → exit {item.get('exit_code')}"]
    if what == "file_change":
        paths = [c.get("path") for c in item.get("changes") or [] if isinstance(c, dict)]
        return [f"  changed {', '.join(str(p) for p in paths)}"]
    if what == "agent_message":
        return [f"  says: {cut(item.get('text'))}"]
    if what == "error":
        return [f"  error: {cut(item.get('message'))}"]
    return [f"  {what}"]
