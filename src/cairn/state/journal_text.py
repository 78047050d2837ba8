"""A journal event as one sentence, in the words ``cairn run`` and ``cairn catchup`` use: what
the dashboard's ticket page shows (its raw JSON stays one toggle away). The fields each event
carries are docs/state.md's table; an event this release does not know is named as it is."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cairn.util.text import counted

ASKED_FROM = {
    "cli": "from the command line",
    "dashboard": "from the dashboard",
    "api": "through the API",
    "fleet": "by the fleet",
}


def sentence(event: dict[str, Any]) -> str:
    """``event`` (``{"t", "event", …}``) as one line."""
    name = str(event.get("event", "?"))
    say = _SAY.get(name)
    if say is None:
        return name.replace("_", " ")
    try:
        return say(event)
    except (KeyError, TypeError, ValueError):  # a field of an unexpected shape: named plainly
        return name.replace("_", " ")


def _get(event: dict[str, Any], key: str, default: str = "?") -> str:
    value = event.get(key)
    return default if value is None else str(value)


def _with(event: dict[str, Any], key: str, before: str = " (", after: str = ")") -> str:
    value = event.get(key)
    return f"{before}{value}{after}" if value not in (None, "") else ""


def _owner(event: dict[str, Any]) -> str:
    owner = event.get("owner")
    if not isinstance(owner, dict) or owner.get("pid") is None:
        return ""
    return f" by pid {owner['pid']} on {owner.get('host', '?')}"


def _started(event: dict[str, Any]) -> str:
    how = "resumed" if event.get("resumed") else "started"
    agent = _with(event, "agent", ", agent ", "")
    return f"run {_get(event, 'run')} of ticket {_get(event, 'ticket')} {how}{agent}{_owner(event)}"


def _dispatch_started(event: dict[str, Any]) -> str:
    dispatch = event.get("dispatch")
    if isinstance(dispatch, dict):  # a format 1 journal: the dispatch record itself
        role, cap = dispatch.get("role"), dispatch.get("max_turns")
    else:
        role, cap = event.get("role"), event.get("max_turns")
    number = f" {dispatch}" if isinstance(dispatch, int) else ""
    up_to = f", up to {counted(int(cap), 'turn')}" if isinstance(cap, int) else ""
    return f"dispatch{number} started: {role or '?'}{up_to}"


def _dispatch_finished(event: dict[str, Any]) -> str:
    turns = event.get("turns")
    after = f" after {counted(int(turns), 'turn')}" if isinstance(turns, int) else ""
    error = _with(event, "error", ": ", "")
    cost = (
        (event.get("usage") or {}).get("cost_usd") if isinstance(event.get("usage"), dict) else None
    )
    spent = (
        f" · ${cost:.2f}"
        if isinstance(cost, int | float)
        else (" · usage unknown" if "usage" not in event else "")
    )
    return f"{_get(event, 'role')} dispatch ended: {_get(event, 'reason')}{after}{error}{spent}"


def _phase(event: dict[str, Any]) -> str:
    round_ = _with(event, "round", ", round ", "")
    status = _with(event, "status", ": ", "")
    return f"phase {_get(event, 'phase')}{round_}{status}"


def _asked(event: dict[str, Any]) -> str:
    by = ASKED_FROM.get(str(event.get("by")), f"by {_get(event, 'by')}")
    return f"{_get(event, 'action')} asked {by}"


def _fix_round(event: dict[str, Any]) -> str:
    findings = event.get("findings")
    count = f": {counted(len(findings), 'finding')}" if isinstance(findings, list) else ""
    conflicts = event.get("conflicts")
    files = (
        f", conflicts in {', '.join(map(str, conflicts))}" if isinstance(conflicts, list) else ""
    )
    why = " to land" if event.get("why") == "land" else ""
    return f"fix round {_get(event, 'round')} asked by {_get(event, 'by')}{why}{count}{files}"


def _landed(event: dict[str, Any]) -> str:
    by = ASKED_FROM.get(str(event.get("by")), f"by {_get(event, 'by')}")
    how = str(event.get("how") or "?").replace("_", " ")
    return f"landed on {_get(event, 'base')} ({how}), asked {by}"


def _snapshot(event: dict[str, Any]) -> str:
    if event.get("error"):
        return f"snapshot failed ({_get(event, 'reason')}): {event['error']}"
    return f"snapshot {_get(event, 'commit')[:12]}{_with(event, 'reason')}"


def _cut(word: str) -> Callable[[dict[str, Any]], str]:
    def say(event: dict[str, Any]) -> str:
        saved = event.get("snapshot")
        kept = f"; work saved at {str(saved)[:12]}" if saved else ""
        return f"{word}: {_get(event, 'reason')}{_with(event, 'detail')}{kept}"

    return say


_SAY: dict[str, Callable[[dict[str, Any]], str]] = {
    "run_started": _started,
    "run_finished": lambda e: f"run finished: {_get(e, 'status').replace('_', ' ')}",
    "run_interrupted": _cut("run interrupted"),
    "takeover": lambda e: f"took the ticket over: {_get(e, 'reason')}",
    "phase": _phase,
    "dispatch_started": _dispatch_started,
    "dispatch_finished": _dispatch_finished,
    "dispatch_retried": lambda e: (
        f"{_get(e, 'role')} dispatch started again (attempt {_get(e, 'attempt')}"
        f"{_with(e, 'of', ' of ', '')}){_with(e, 'error', ' after: ', '')}"
    ),
    "agent_switched": lambda e: (
        f"moved from agent {_get(e, 'from')} to {_get(e, 'to')}"
        f"{_with(e, 'reason', ' (', ')').replace('_', ' ')}"
    ),
    "turn": lambda e: (
        f"{_get(e, 'role')} turn {_get(e, 'turn')}"
        + (" (wrap-up directive sent)" if e.get("pressure") else "")
    ),
    "task": lambda e: f"task {_get(e, 'task')} {_get(e, 'status')}{_with(e, 'notes', ': ', '')}",
    "finding": lambda e: (
        f"finding {_get(e, 'finding')} added: {_get(e, 'title')}"
        if e.get("action") == "added"
        else f"finding {_get(e, 'finding')} {_get(e, 'status')}"
    ),
    "gate": lambda e: f"gate {_get(e, 'gate')} {_get(e, 'result')}{_with(e, 'reason', ': ', '')}",
    "deferred": lambda e: f"deferred: {_get(e, 'item')}",
    "snapshot": _snapshot,
    "cutoff": _cut("cut off"),
    "marker_cleared": lambda e: f"marker cleared by {_get(e, 'by')}{_with(e, 'detail', ': ', '')}",
    "asked": _asked,
    "need_raised": lambda e: f"needs a person: {str(_get(e, 'state')).replace('_', ' ')}",
    "need_met": lambda e: (
        f"{_get(e, 'by')} asked {_get(e, 'action')} of it"
        + (f" after {e['waited_s']}s" if isinstance(e.get("waited_s"), int) else "")
        + f" ({str(_get(e, 'state')).replace('_', ' ')})"
    ),
    "answered": lambda e: (
        f"answered by {_get(e, 'by')}"
        + (f" after {e['waited_s']}s" if isinstance(e.get("waited_s"), int) else "")
        + f": {' '.join(str(e.get('text', '')).split())[:200]}"
    ),
    "fix_round": _fix_round,
    "approved": lambda e: (
        f"approved by {_get(e, 'by')}" + (f" at {str(e['commit'])[:10]}" if e.get("commit") else "")
    ),
    "landed": _landed,
}


def tail(
    run_dir: Path | None, asked: list[dict[str, Any]] | None, most: int
) -> list[dict[str, Any]]:
    """The last ``most`` events of the run's journal (none without ``run_dir``), each with its
    sentence (``text``), with what people ``asked`` of a ticket on Temporal (kept in its
    workflow's memo, as the run's journal is the workers'), in time order."""
    from cairn.errors import CairnError
    from cairn.state import journal

    events: list[dict[str, Any]] = []
    if run_dir is not None:
        try:
            events = journal.read(run_dir)[0][-most:]
        except (OSError, CairnError):
            events = []
    shown = [{**event, "text": sentence(event)} for event in events]
    for ask in asked or []:
        event = {
            "t": ask.get("at"),
            "event": "asked",
            "action": ask.get("action"),
            "by": ask.get("by"),
        }
        shown.append({**event, "text": sentence(event)})
    return sorted(shown, key=lambda e: str(e.get("t") or ""))[-most:] if asked else shown
