"""One readable line per transcript event, for ``cairn logs``: tool calls with their command or
path (``(denied)`` when refused), messages cut to one line, errors as ``error: …``. Knows the
scripted agent's events, Claude Code's ``stream-json`` and Codex's ``exec --json``; any other
event is its type and a cut of its JSON. The ``turn N`` lines are the caller's: it counts the
turns as cairn does (``cairn.agents.replay``), which is not always as the agent does."""

from __future__ import annotations

import json
from collections.abc import Callable, Container
from typing import Any

from cairn.terms import CLAUDE_SYNTHETIC_MODEL
from cairn.util.text import counted, tool_target

MESSAGE_LIMIT = 160  # characters of a message or a tool's input on its line


def cut(text: Any, limit: int = MESSAGE_LIMIT) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def describe(
    record: dict[str, Any], denied: Container[str] = (), turns: int | None = None
) -> list[str]:
    """The lines for one event (none for bookkeeping events not worth a line). ``denied``: the
    ids of the tool calls refused so far; ``turns``: the dispatch's turns so far, as cairn
    counts them."""
    kind = str(record.get("type", "?"))
    if kind == "turn_started":
        return []
    if kind in _SCRIPTED:
        return [_SCRIPTED[kind](record)]
    if kind in ("assistant", "user"):
        return _claude_message(record, denied)
    if kind == "system":
        subtype = record.get("subtype")
        return [f"session started ({record.get('model', '?')})"] if subtype == "init" else []
    if kind == "result":
        return [_claude_result(record, turns)]
    if kind.startswith(("thread.", "turn.", "item.")) or kind == "error":
        return _codex(kind, record, denied)
    return [f"{kind}: {cut(json.dumps(record, ensure_ascii=False))}"]


def _claude_result(record: dict[str, Any], turns: int | None) -> str:
    after = f" after {counted(turns, 'turn')}" if turns is not None else ""
    refused = len(record.get("permission_denials") or [])
    tail = f", {counted(refused, 'tool call')} denied" if refused else ""
    capped = record.get("subtype") == "error_max_turns"  # the turn cap: a cutoff, not an error
    if not capped and (record.get("is_error") or record.get("subtype") != "success"):
        errors = record.get("errors") or [record.get("result") or record.get("subtype")]
        text = "; ".join(str(e) for e in errors) if isinstance(errors, list) else errors
        return f"error: {cut(text)} (result {record.get('subtype', '?')}{after}){tail}"
    return f"result: {record.get('subtype')}{after}{tail}"


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
    "turn_completed": lambda r: f"turn {r.get('turn')} done",
    "tool_use": _scripted_tool,
    "file_changed": lambda r: f"  changed {r.get('path')}",
    "message": lambda r: f"  says: {cut(r.get('text'))}",
    "plan_updated": lambda r: f"  plan: {len(r.get('items') or [])} items",
    "transcript_truncated": lambda r: f"(transcript cut at {r.get('limit')} bytes)",
    "unreadable": lambda r: f"(unreadable line: {cut(r.get('text'), 60)})",
}


def _claude_message(record: dict[str, Any], denied: Container[str]) -> list[str]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    said = "error" if message.get("model") == CLAUDE_SYNTHETIC_MODEL else "says"  # type: ignore[union-attr]
    lines = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            lines.append(f"  {said}: {cut(part.get('text'))}")
        elif part.get("type") == "tool_use":
            lines.append(f"  tool {_tool(part.get('name'), part.get('input'))}")
        elif part.get("type") == "tool_result" and part.get("is_error"):
            refused = part.get("tool_use_id") in denied  # a refusal has its own line
            lines += [] if refused else [f"  tool error: {cut(part.get('content'))}"]
    return lines


def _codex(kind: str, record: dict[str, Any], denied: Container[str]) -> list[str]:
    if kind in ("turn.started", "turn.completed", "thread.started"):
        return []  # an invocation of codex exec, not one of cairn's turns
    if kind == "turn.failed":
        error = record.get("error")
        text = error.get("message") if isinstance(error, dict) else error
        return [f"error: {cut(text)} (turn failed)"]
    if kind == "error":
        return [f"error: {cut(record.get('message') or record.get('text'))}"]
    item = record.get("item")
    if kind != "item.completed" or not isinstance(item, dict):
        return []
    what = item.get("type")
    if what == "command_execution":
        refused = " (denied)" if item.get("id") in denied else ""
        command = cut(item.get("command"))
        return [f"  tool exec: {command} → exit {item.get('exit_code')}{refused}"]
    if what == "file_change":
        paths = [c.get("path") for c in item.get("changes") or [] if isinstance(c, dict)]
        return [f"  changed {', '.join(str(p) for p in paths)}"]
    if what == "agent_message":
        return [f"  says: {cut(item.get('text'))}"]
    if what == "error":
        return [f"  error: {cut(item.get('message'))}"]
    return [f"  {what}"]
