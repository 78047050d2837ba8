"""What the agent is doing, for the event sink: one ``tool`` event per tool call (and a
``tool_denied`` one when it is refused), one ``message`` event per message of the agent, and
the agent's session id once it is known (``session``, with the command that continues the
session by hand)."""

from __future__ import annotations

from pathlib import Path

from cairn.agents.base import Event
from cairn.run.orchestrator.context import RunContext
from cairn.util.text import one_line, tool_target

MESSAGE_LIMIT = 2000  # characters of a message an event carries


def show(ctx: RunContext, dispatch: int, role: str, event: Event) -> None:
    """Pass what ``event`` says the agent did on to the sink (nothing for bookkeeping)."""
    data, turn = event.data, event.turn
    if event.kind == "turn_started" and isinstance(data.get("session_id"), str):
        _session(ctx, dispatch, role, data["session_id"])
    elif event.kind == "tool_use":
        tool = str(data.get("tool") or data.get("name") or "?")
        given = data.get("target")
        target = _short(ctx, given if isinstance(given, str) else tool_target(data.get("input")))
        ctx.sink.event("tool", dispatch=dispatch, turn=turn, tool=tool, target=target)
        if data.get("denied"):
            message = str(data.get("message") or "")
            said = {"tool": tool, "target": target, "message": message}
            ctx.sink.event("tool_denied", dispatch=dispatch, turn=turn, **said)
    elif event.kind == "tool_denied":
        target = _short(ctx, str(data.get("target") or ""))
        said = {"tool": str(data.get("tool") or "?"), "target": target}
        message = str(data.get("message") or "")
        ctx.sink.event("tool_denied", dispatch=dispatch, turn=turn, message=message, **said)
    elif event.kind == "message" and str(data.get("text") or "").strip():
        text = str(data["text"]).strip()[:MESSAGE_LIMIT]
        ctx.sink.event("message", dispatch=dispatch, turn=turn, text=text)


def _session(ctx: RunContext, dispatch: int, role: str, session_id: str) -> None:
    """The agent's session, once per session id in this process."""
    if session_id in ctx.sessions:
        return
    ctx.sessions.add(session_id)
    command = ctx.adapter.resume_command(session_id)
    ctx.sink.event("session", dispatch=dispatch, role=role, session_id=session_id, resume=command)


def _short(ctx: RunContext, target: str) -> str:
    """A path inside the work tree, relative to it (as the agent's own display shows it)."""
    target = one_line(target)
    if " " in target or not target.startswith("/"):
        return target
    try:
        return str(Path(target).relative_to(ctx.repo.toplevel))
    except ValueError:
        return target
