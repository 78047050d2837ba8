"""Which tickets were run from which branch: ``<state root>/branches.json``.

A run's ticket comes from ``--ticket`` or the plan; the commands that default to the branch's
ticket (``catchup``, ``resume``, the progress reports, the Claude Code hooks) would not find a
run of ticket ``plan`` started on branch ``ECO-2``. ``cairn run`` records the branch → ticket
pair here when they differ, and those commands fall back to it when the branch's own ticket has
no run.
"""

from __future__ import annotations

import json
from pathlib import Path

from cairn import tickets
from cairn.errors import CairnError
from cairn.git import Repo
from cairn.state.layout import MARKER, Layout
from cairn.state.names import BRANCHES
from cairn.util import durable

FILE = BRANCHES
LOCK = ".branches.lock"
READ_LIMIT = 4 * 1024 * 1024
KEEP = 20  # tickets remembered per branch, the newest last


def path(layout: Layout) -> Path:
    return layout.root / FILE


def read(layout: Layout) -> dict[str, list[str]]:
    """Branch → its tickets, oldest first; an unreadable file counts as empty (it is a hint)."""
    try:
        data = durable.read_state_file(path(layout), "branch map", READ_LIMIT)
        raw = json.loads(data) if data is not None else {}
    except (CairnError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    return {
        str(branch): [t for t in found if isinstance(t, str) and tickets.problem(t) is None]
        for branch, found in raw.items()
        if isinstance(found, list)
    }


def remember(layout: Layout, branch: str, ticket: str) -> None:
    """Record that ``ticket`` was run from ``branch`` (moved to the end when known)."""
    durable.ensure_dir(layout.root)
    with durable.locked(layout.root / LOCK):
        mapping = read(layout)
        found = [t for t in mapping.get(branch, []) if t != ticket] + [ticket]
        mapping[branch] = found[-KEEP:]
        text = json.dumps(mapping, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
        durable.atomic_write(path(layout), text)


def has_run(layout: Layout, ticket: str) -> bool:
    return (layout.ticket_dir(ticket) / MARKER).is_file() or layout.latest_run(ticket) is not None


def default_ticket(repo: Repo, layout: Layout) -> tuple[str, str | None]:
    """The ticket a command means when none is given, and a note when it is not the branch's.

    The branch's own ticket (``tickets.from_branch``) while it has a run; otherwise the ticket
    last run from this branch that has one, with a note naming the others."""
    branch = repo.current_branch()
    own = tickets.from_branch(branch)
    if branch is None or has_run(layout, own):
        return own, None
    runs = [t for t in reversed(read(layout).get(branch, [])) if t != own and has_run(layout, t)]
    if not runs:
        return own, None
    chosen, others = runs[0], runs[1:]
    note = f"branch {branch} has no run of ticket {own}; using ticket {chosen}, run from it"
    if others:
        note += f" (its other tickets: {', '.join(others)})"
    return chosen, note


def branch_note(repo: Repo, ticket: str) -> tuple[str | None, str | None]:
    """The current branch when its own ticket differs from ``ticket`` (then a one-line note),
    else ``(None, None)``."""
    branch = repo.current_branch()
    if branch is None or tickets.map_name(branch) == ticket:
        return None, None
    return branch, (
        f"ticket {ticket} (branch {branch} would be ticket {tickets.map_name(branch) or '?'}); "
        f"cairn catchup and cairn resume on this branch find it"
    )
