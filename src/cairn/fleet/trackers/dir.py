"""The ``dir`` tracker: one plan file per ticket in ``fleet.queue``.

STAND-IN (helper A, branch fleet-sup) of helper B's module; the integrator takes B's version.
"""

from __future__ import annotations

from pathlib import Path

from cairn import tickets
from cairn.config import Config
from cairn.fleet.trackers.base import Candidate, Tracker
from cairn.git import Repo
from cairn.state import fleetstate
from cairn.state.layout import Layout
from cairn.util import frontmatter

SUFFIXES = (".md", ".yaml", ".yml", ".json")
FINISHED = ("completed", "needs_review", "failed", "needs_input")


def plan_ticket(path: Path) -> str:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if frontmatter.opens(lines):
        close = frontmatter.closing_line(lines)
        meta = frontmatter.load(lines, close) if close is not None else None
        if isinstance(meta, dict) and isinstance(meta.get("ticket"), str):
            return tickets.validate(meta["ticket"])
    return tickets.validate(tickets.map_name(path.stem))


class DirTracker(Tracker):
    def __init__(self, repo: Repo, config: Config, layout: Layout) -> None:
        self.queue = repo.toplevel / config.fleet.queue
        self.layout = layout

    def candidates(self) -> list[Candidate]:
        if not self.queue.is_dir():
            return []
        found = []
        for path in sorted(self.queue.iterdir()):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            ticket = plan_ticket(path)
            record = fleetstate.read(self.layout, ticket)
            if record is not None and record.state in FINISHED:
                continue
            found.append(Candidate(ticket, path.absolute()))
        return found

    def claim(self, ticket: str) -> bool:
        return True

    def transition(self, ticket: str, state: str, detail: str | None = None) -> None:
        return None

    def finish(self, ticket: str, state: str) -> None:
        return None
