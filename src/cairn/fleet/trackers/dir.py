"""The ``dir`` tracker: one plan file per ticket in the queue directory (``fleet.queue``).

The ticket id is the plan's ``ticket:`` (front matter, or the top level of a YAML/JSON plan),
else the file stem; either must be a valid ticket id (``cairn.tickets``), and two plans may not
name the same ticket. A plan added while the supervisor runs is listed at the next
``candidates()``. Where each ticket stands is the fleet record
(``<state root>/fleet/tickets/<ticket>.json``): a finished ticket is recorded there and no longer
listed; its plan file is never moved or deleted.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from cairn import tickets
from cairn.config.records import Config
from cairn.errors import BadInput
from cairn.fleet import fleetstate
from cairn.fleet.trackers.base import Candidate, Rejected, Tracker
from cairn.git import Repo
from cairn.state.layout import Layout
from cairn.terms import SETTLED_STATES

PLAN_SUFFIXES = (".md", ".yaml", ".yml", ".json")


def is_finished(record: fleetstate.FleetTicket, config: Config) -> bool:
    """Whether a ticket is done for good (not listed, and ``fleet prune --all-finished`` may
    remove its worktree): a settled state, or ``interrupted`` with its attempts spent (a
    graceful stop leaves tickets interrupted that the next supervisor resumes)."""
    if record.state in SETTLED_STATES:
        return True
    return record.state == "interrupted" and record.attempt >= config.fleet.max_attempts


def queue_dir(repo: Repo, config: Config) -> Path:
    return (repo.toplevel / Path(config.fleet.queue).expanduser()).absolute()


class DirTracker(Tracker):
    def __init__(self, repo: Repo, config: Config, layout: Layout) -> None:
        super().__init__()
        self.repo, self.config, self.layout = repo, config, layout
        self.queue = queue_dir(repo, config)
        self._ids: dict[tuple[str, int, int], str | Rejected] = {}  # (path, mtime, size) → id
        self._plans: dict[str, Path] = {}

    def candidates(self) -> list[Candidate]:
        found: dict[str, Path] = {}
        rejected: list[Rejected] = []
        for path in self._plan_files(rejected):
            ticket = self._ticket_of(path)
            if isinstance(ticket, Rejected):
                rejected.append(ticket)
                continue
            other = found.get(ticket)
            if other is not None:
                if self._owns(ticket, path):  # the plan the ticket runs keeps it
                    found[ticket], path, other = path, other, path
                rejected.append(
                    Rejected(
                        self._relative(path),
                        f"plan {path.name} names ticket {ticket!r}, as {other.name} "
                        "does; give one of them another 'ticket:' or file name",
                        ticket,
                        _version(path),
                    )
                )
            else:
                found[ticket] = path
        self.rejected = sorted(rejected, key=lambda r: r.plan)
        self._plans = found
        return [Candidate(t, p) for t, p in sorted(found.items()) if not self.finished(t)]

    def _owns(self, ticket: str, path: Path) -> bool:
        """Whether ``ticket``'s fleet record names ``path`` as its plan."""
        try:
            record = fleetstate.read(self.layout, ticket)
        except BadInput:  # a broken record is the supervisor's to report
            return False
        return record is not None and record.plan == self._relative(path)

    def finished(self, ticket: str) -> bool:
        record = fleetstate.read(self.layout, ticket)
        return record is not None and is_finished(record, self.config)

    def claim(self, ticket: str) -> bool:
        """True when the plan is still queued and the ticket not finished; a ticket seen for
        the first time gets its record (``queued``)."""
        plan = self._plans.get(ticket)
        if plan is None or not plan.is_file() or self.finished(ticket):
            return False
        if fleetstate.read(self.layout, ticket) is None:
            self._write(ticket, "queued", None)
        return True

    def transition(self, ticket: str, state: str, detail: str | None = None) -> None:
        self._write(ticket, state, detail)

    def finish(self, ticket: str, state: str) -> None:
        record = fleetstate.read(self.layout, ticket)
        self._write(ticket, state, record.detail if record is not None else None)

    def _write(self, ticket: str, state: str, detail: str | None) -> None:
        record = fleetstate.read(self.layout, ticket)
        now = datetime.now(UTC)
        if record is None:
            plan = self._plans.get(ticket)
            record = msgspec.convert(
                {
                    "ticket": tickets.validate(ticket),
                    "plan": self._relative(plan) if plan is not None else "",
                    "state": state,
                    "detail": detail,
                    "updated": now,
                },
                fleetstate.FleetTicket,
                strict=False,
            )
        else:
            record = msgspec.structs.replace(record, state=state, detail=detail, updated=now)
            # validated again: a bad state is refused
            record = msgspec.convert(msgspec.structs.asdict(record), type(record), strict=False)
        fleetstate.write(self.layout, record)

    def _relative(self, plan: Path) -> str:
        try:
            return str(plan.relative_to(self.repo.toplevel))
        except ValueError:
            return str(plan)

    def _plan_files(self, rejected: list[Rejected]) -> list[Path]:
        """The plan files of the queue, by name; an entry named like a plan that is not one
        (a directory, a FIFO, a link to nothing or to a file outside the repository) is
        rejected without being opened."""
        try:
            entries = sorted(os.scandir(self.queue), key=lambda e: e.name)
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            raise BadInput(
                f"fleet.queue {self.queue} is not a directory; point fleet.queue at the "
                "directory of plan files"
            ) from None
        plans = []
        for entry in entries:
            if entry.name.startswith((".", "#")) or not entry.name.lower().endswith(PLAN_SUFFIXES):
                continue
            path = Path(entry.path)
            why = self._not_a_plan(entry, path)
            if why is None:
                plans.append(path)
            else:
                rejected.append(Rejected(self._relative(path), why, None, _version(path)))
        return plans

    def _not_a_plan(self, entry: os.DirEntry[str], path: Path) -> str | None:
        fix = f"put the plan file itself in {self._relative(self.queue)}"
        if entry.is_symlink() and not path.exists():
            return f"plan {entry.name} is a link to nothing; {fix}"
        if entry.is_symlink():
            target = path.resolve()
            if not target.is_relative_to(self.repo.toplevel.resolve()):
                return (
                    f"plan {entry.name} is a link to {target}, outside the repository; "
                    f"{fix}, or move the file it links to into the repository"
                )
        if entry.is_file():
            return None
        what = "a directory" if entry.is_dir() else "not a regular file"
        return f"plan {entry.name} is {what}; {fix}"

    def _ticket_of(self, path: Path) -> str | Rejected:
        """The ticket a plan names (cached until the file changes)."""
        try:
            info = path.stat()
        except OSError as exc:
            return Rejected(
                self._relative(path),
                f"plan {path.name} cannot be read ({exc.strerror}); check its permissions",
            )
        key = (str(path), info.st_mtime_ns, info.st_size)
        if key not in self._ids:
            self._ids[key] = self._read_ticket(path, info.st_size, _version(path))
        return self._ids[key]

    def _read_ticket(self, path: Path, size: int, version: str) -> str | Rejected:
        from cairn.run import plan as plans

        stem_ok = tickets.problem(path.stem) is None
        where = self._relative(path)
        if size > plans.PLAN_READ_LIMIT:  # refused by its size, never read
            return Rejected(
                where,
                f"plan {path.name} is {size} bytes, over the {plans.PLAN_READ_LIMIT} byte limit "
                "of a plan; split it into smaller plans",
                path.stem if stem_ok else None,
                version,
            )
        try:
            declared = plans.load(path).ticket
        except BadInput as exc:  # the parser names the plan by its absolute path
            said = str(exc).replace(str(path), where)
            return Rejected(where, said, path.stem if stem_ok else None, version)
        if declared is not None:
            return declared  # validated by the plan parser
        if stem_ok:
            return path.stem
        why = tickets.problem(path.stem)
        mapped = tickets.map_name(path.stem)
        fix = f"rename it {mapped}{path.suffix} or add" if mapped else "rename it or add"
        return Rejected(
            where,
            f"plan {path.name}: its name {path.stem!r} is not a ticket id ({why}); "
            f"{fix} 'ticket: PROJ-123' front matter",
            None,
            version,
        )


def _version(path: Path) -> str:
    """What changes when the entry changes: the file's (or its link target's) mtime and size,
    and where a link points."""
    try:
        info = path.stat()
        stamp = f"{info.st_mtime_ns}:{info.st_size}"
    except OSError:
        stamp = "-"
    try:
        return f"{stamp}:{os.readlink(path)}" if path.is_symlink() else stamp
    except OSError:
        return stamp
