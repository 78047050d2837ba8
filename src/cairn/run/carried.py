"""What a resumed run carries over from its earlier sessions, read from its files: why it
stopped (for the handoff prompt), the coder's agent session, and ``--max-turns``."""

from __future__ import annotations

from cairn.state import journal
from cairn.state.runstate import RunRef


def given(max_turns: int | None) -> dict[str, int]:
    """``--max-turns``, kept in the journal's ``run_started`` for a later resume."""
    return {"max_turns": max_turns} if max_turns is not None else {}


def max_turns(ref: RunRef) -> int | None:
    """The ``--max-turns`` the run was started (or last resumed) with, from its journal."""
    events, _ = journal.read(ref.run_dir)
    for event in reversed(events):
        if event.get("event") == "run_started" and isinstance(event.get("max_turns"), int):
            return int(event["max_turns"])
    return None


def resumed_from(ref: RunRef) -> str:
    """Why the run stopped, for the resumed coder's handoff prompt."""
    status = ref.load_summary()[1].status
    if status.state == "interrupted" and status.reason:
        return f"{status.reason} (the run was resumed with cairn resume)"
    return "the previous cairn process stopped (the run was resumed with cairn resume)"


def session_id(ref: RunRef, role: str, agent: str) -> str | None:
    """The agent's conversation id (``session_id``) of the run's last dispatch of ``role``, for
    agents that have one; None when another agent of the chain made it, or when it was made on
    another machine: an agent keeps its sessions in its own home (``~/.claude``,
    ``$CODEX_HOME``), which does not travel with the run state (a ``--remote`` run resumed in
    another clone, a segment of the fleet on Temporal on another worker), so the resumed
    agent starts a new session from the handoff prompt instead."""
    from cairn.state.owner import this_host

    events, _ = journal.read(ref.run_dir)
    for at in range(len(events) - 1, -1, -1):
        event = events[at]
        if event.get("event") == "dispatch_finished" and event.get("role") == role:
            if event.get("agent", agent) != agent:
                return None
            session_id = event.get("session_id")
            if not isinstance(session_id, str):
                return None
            host = _host_of(events[:at])
            return session_id if host in (None, this_host()) else None
    return None


def _host_of(events: list[dict[str, object]]) -> str | None:
    """The host of the session of the run these events end in (its last ``run_started``'s
    owner); None when it is not recorded."""
    for event in reversed(events):
        if event.get("event") == "run_started":
            owner = event.get("owner")
            host = owner.get("host") if isinstance(owner, dict) else None
            return host if isinstance(host, str) else None
    return None
