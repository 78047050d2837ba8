"""One readable line per transcript event, for ``cairn logs`` and the dashboard's transcript API:
tool calls with their command or path (``(denied)`` when refused), messages cut to one line,
errors as ``error: …``. Knows the scripted agent's events, Claude Code's ``stream-json`` and
Codex's ``exec --json``; any other event is its type and a cut of its JSON. The ``turn N`` lines
are ``cairn.agents.replay.LineReader``'s: it counts the turns as cairn does, which is not always
as the agent does."""

from __future__ import annotations

import json
from collections.abc import Callable, Container
from typing import Any, NamedTuple

from cairn.terms import CLAUDE_SYNTHETIC_MODEL
from cairn.util.text import counted, tool_target

MESSAGE_LIMIT = 160  # characters of a message or a tool's input on its line


class Line(NamedTuple):
    """One line of ``cairn logs``: ``text`` as printed, and what it is for the dashboard's
    transcript API. ``kind``: turn, tool, message, change, error, result, session, plan or
    note; ``tool``: the tool called (tool lines); ``denied``: a call cairn counted as refused;
    ``at``: when the agent says it happened (ISO 8601), None when its stream does not say."""

    kind: str
    text: str
    tool: str | None = None
    denied: bool = False
    at: str | None = None


def cut(text: Any, limit: int = MESSAGE_LIMIT) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def at_of(record: dict[str, Any]) -> str | None:
    for key in ("timestamp", "t", "at"):
        value = record.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def describe(
    record: dict[str, Any], denied: Container[str] = (), turns: int | None = None
) -> list[Line]:
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
        started = f"session started ({record.get('model', '?')})"
        return [Line("session", started)] if subtype == "init" else []
    if kind == "result":
        return [_claude_result(record, turns)]
    if kind.startswith(("thread.", "turn.", "item.")) or kind == "error":
        return _codex(kind, record, denied)
    return [Line("note", f"{kind}: {cut(json.dumps(record, ensure_ascii=False))}")]


def _claude_result(record: dict[str, Any], turns: int | None) -> Line:
    after = f" after {counted(turns, 'turn')}" if turns is not None else ""
    refused = len(record.get("permission_denials") or [])
    tail = f", {counted(refused, 'tool call')} denied" if refused else ""
    capped = record.get("subtype") == "error_max_turns"  # the turn cap: a cutoff, not an error
    if not capped and (record.get("is_error") or record.get("subtype") != "success"):
        errors = record.get("errors") or [record.get("result") or record.get("subtype")]
        text = "; ".join(str(e) for e in errors) if isinstance(errors, list) else errors
        said = f"error: {cut(text)} (result {record.get('subtype', '?')}{after}){tail}"
        return Line("error", said)
    return Line("result", f"result: {record.get('subtype')}{after}{tail}")


def _tool(name: Any, data: Any) -> str:
    target = tool_target(data)
    return f"{name}: {cut(target)}" if target else str(name)


def _tool_line(name: Any, data: Any, denied: bool = False, after: str = "") -> Line:
    refused = " (denied)" if denied else ""
    return Line("tool", f"  tool {_tool(name, data)}{refused}{after}", str(name), denied)


def _scripted_tool(record: dict[str, Any]) -> Line:
    output = record.get("output")
    code = output.get("exit_code") if isinstance(output, dict) else None
    after = f" → exit {code}" if code else ""
    return _tool_line(record.get("name"), record.get("input"), bool(record.get("denied")), after)


_SCRIPTED: dict[str, Callable[[dict[str, Any]], Line]] = {
    "turn_completed": lambda r: Line("turn", f"turn {r.get('turn')} done"),
    "tool_use": _scripted_tool,
    "file_changed": lambda r: Line("change", f"  changed {r.get('path')}"),
    "message": lambda r: Line("message", f"  says: {cut(r.get('text'))}"),
    "plan_updated": lambda r: Line("plan", f"  plan: {len(r.get('items') or [])} items"),
    "transcript_truncated": lambda r: Line("note", f"(transcript cut at {r.get('limit')} bytes)"),
    "unreadable": lambda r: Line("note", f"(unreadable line: {cut(r.get('text'), 60)})"),
}


def _claude_message(record: dict[str, Any], denied: Container[str]) -> list[Line]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    synthetic = message.get("model") == CLAUDE_SYNTHETIC_MODEL  # type: ignore[union-attr]
    lines = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            if synthetic:
                lines.append(Line("error", f"  error: {cut(part.get('text'))}"))
            else:
                lines.append(Line("message", f"  says: {cut(part.get('text'))}"))
        elif part.get("type") == "tool_use":
            lines.append(_tool_line(part.get("name"), part.get("input")))
        elif part.get("type") == "tool_result" and part.get("is_error"):
            refused = part.get("tool_use_id") in denied  # a refusal has its own line
            if not refused:
                lines.append(Line("error", f"  tool error: {cut(part.get('content'))}"))
    return lines


def _codex(kind: str, record: dict[str, Any], denied: Container[str]) -> list[Line]:
    if kind in ("turn.started", "turn.completed", "thread.started"):
        return []  # an invocation of codex exec, not one of cairn's turns
    if kind == "turn.failed":
        error = record.get("error")
        text = error.get("message") if isinstance(error, dict) else error
        return [Line("error", f"error: {cut(text)} (turn failed)")]
    if kind == "error":
        return [Line("error", f"error: {cut(record.get('message') or record.get('text'))}")]
    item = record.get("item")
    if kind != "item.completed" or not isinstance(item, dict):
        return []
    what = item.get("type")
    if what == "command_execution":
        refused = item.get("id") in denied
        line = _tool_line("exec", item.get("command"), after=f" → exit {item.get('exit_code')}")
        if refused:
            line = line._replace(text=line.text + " (denied)", denied=True)
        return [line]
    if what == "file_change":
        paths = [c.get("path") for c in item.get("changes") or [] if isinstance(c, dict)]
        return [Line("change", f"  changed {', '.join(str(p) for p in paths)}")]
    if what == "agent_message":
        return [Line("message", f"  says: {cut(item.get('text'))}")]
    if what == "error":
        return [Line("error", f"  error: {cut(item.get('message'))}")]
    return [Line("note", f"  {what}")]
