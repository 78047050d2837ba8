"""One live run per work tree: another ticket's run in the same work tree snapshots its files.

All work trees of a clone share one state root, so a live run of another ticket is only a
problem when it works in this work tree. A run journals its work tree (``workspace``) in every
``run_started`` event; a ticket whose marker has a live owner on this host and whose latest
``run_started`` names this work tree is running here. A run journalled without a work tree (an
older cairn) is not counted.
"""

from __future__ import annotations

import os
from pathlib import Path

from cairn.errors import BadInput
from cairn.state import journal, marker
from cairn.state.layout import Layout
from cairn.util import clock


class LiveRun:
    def __init__(self, ticket: str, run: str, detail: str) -> None:
        self.ticket, self.run, self.detail = ticket, run, detail


def live_runs_here(
    layout: Layout, toplevel: Path, ticket: str, stale_after: float
) -> list[LiveRun]:
    """Live runs of tickets other than ``ticket`` whose work tree is ``toplevel``."""
    here = os.path.realpath(toplevel)
    now = clock.now()
    found = []
    for other in layout.list_tickets():
        if other == ticket:
            continue
        current = marker.read(layout.marker_path(other))
        if current is None or current.owner is None or current.run is None:
            continue
        state, liveness, detail = marker.judge(current, stale_after, now)
        if state != "in_progress" or liveness != "alive":
            continue
        events, _ = journal.read(layout.run_dir(other, current.run))
        starts = [e for e in events if e.get("event") == "run_started"]
        workspace = starts[-1].get("workspace") if starts else None
        if isinstance(workspace, str) and os.path.realpath(workspace) == here:
            found.append(LiveRun(other, current.run, detail))
    return found


def refuse_shared(
    layout: Layout, toplevel: Path, ticket: str, stale_after: float, verb: str
) -> None:
    """BadInput naming the first live run of another ticket in this work tree, if any."""
    live = live_runs_here(layout, toplevel, ticket, stale_after)
    if not live:
        return
    first = live[0]
    raise BadInput(
        f"ticket {first.ticket} is being run in this work tree right now ({first.detail}); "
        f"a second ticket here would snapshot its files: {verb} {ticket} in its own work tree "
        f"(git worktree add ../{ticket}), or pass --allow-shared"
    )
