"""What needs a person now, apart from news: the attention queue.

A fleet ticket needs you when its state is one a person must act on (``notify.attention_of``:
a question, a review, the budget, a failure, attempts spent, a usage limit no fallback can take
over) and is one the fleet tells of (``notify.wanted_of``: not a person's own stop). ``queue``
lists them oldest first, with how long each has waited and what to do (``cairn.terms.TO_DO``),
for ``cairn fleet status --attention`` and the dashboard's "Needs you". The ticket's journal
records when a need was raised (``need_raised``, by the supervisor as it tells the state) and
when a person met it (``need_met``: what they asked, and how long it waited), so the time to
unblock is measured (``unblocked``).
"""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import Any

from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.notify import attention_of, wanted_of
from cairn.state import runstate
from cairn.state.layout import Layout
from cairn.terms import TO_DO, JournalEvent


def of(record: FleetTicket) -> bool:
    """Whether ``record``'s ticket needs a person now."""
    return needs(record.state, record.detail, record.last_reason)


def needs(state: str, detail: str | None, last_reason: str | None) -> bool:
    return wanted_of(state, last_reason) and attention_of(state, detail, last_reason) == "needs_you"


def queue(rows: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """The rows (``cairn fleet status --json``'s) of the tickets that need you, oldest first:
    ``ticket``, ``state``, ``since`` (when it came to need you), ``waited_s``, ``detail``,
    ``to_do``."""
    found = []
    for row in rows:
        state, ticket = row.get("state"), row.get("ticket")
        if not isinstance(state, str) or not isinstance(ticket, str):
            continue
        if not needs(state, row.get("detail"), row.get("last_reason")):
            continue
        since = _when(row.get("updated"))
        found.append(
            {
                "ticket": ticket,
                "state": state,
                "since": row.get("updated"),
                "waited_s": max(0, int((now - since).total_seconds())) if since else None,
                "detail": row.get("detail"),
                "to_do": next(
                    (t.format(ticket=ticket) for s, t in TO_DO.items() if s == state), None
                ),
            }
        )
    return sorted(found, key=lambda need: str(need["since"] or ""))


def raised(layout: Layout, record: FleetTicket) -> None:
    """Journal that ``record``'s ticket needs a person now (``need_raised``), once per state told
    (its key)."""
    if of(record):
        from cairn.fleet.fleetstate import key_of

        fields = {"state": record.state, "key": key_of(record)}
        journal(layout, record.ticket, "need_raised", **fields)


def met(layout: Layout, record: FleetTicket, action: str, by: str, now: datetime) -> None:
    """Journal that a person met ``record``'s need by asking ``action`` (``need_met``, with how
    long it waited); nothing when the ticket did not need one."""
    if of(record):
        waited = max(0, int((now - record.updated).total_seconds()))
        fields = {"state": record.state, "action": action, "by": by, "waited_s": waited}
        journal(layout, record.ticket, "need_met", **fields)


def unblocked(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The time to unblock over ``need_met`` events: how many, the median and the longest
    wait (seconds); None without any."""
    waits = [e["waited_s"] for e in events if isinstance(e.get("waited_s"), int)]
    if not waits:
        return None
    median = int(statistics.median(waits))
    return {"needs_met": len(waits), "median_s": median, "longest_s": max(waits)}


def _when(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def journal(layout: Layout, ticket: str, event: JournalEvent, **fields: Any) -> str | None:
    """``event`` in the journal of the ticket's run (the one its marker names, else its latest;
    a ticket that never ran has none). None once written, else why it could not be."""
    from cairn.errors import CairnError
    from cairn.state import marker

    try:
        current = marker.read(layout.marker_path(ticket))
        run_id = current.run if current is not None else None
        if run_id is None or not layout.run_dir(ticket, run_id).is_dir():
            run_id = layout.latest_run(ticket)
        if run_id is None:
            return None
        runstate.record(runstate.RunRef(layout, ticket, run_id), event, **fields)
    except (CairnError, OSError) as exc:
        return f"ticket {ticket}: its {event.replace('_', ' ')} is not in its journal ({exc})"
    return None
