"""The fleet's on-disk records: ``<state root>/fleet/tickets/<ticket>.json``, one per ticket.

A record says where a ticket stands in the fleet (queued, running, retrying, …), its attempt
count and retry time, its worktree and branch, and the child process running it. The
supervisor writes them (atomically, through ``util.durable``); ``cairn fleet status`` and
``cairn status`` read them, with or without a supervisor running. A record that cannot be read
is skipped with a warning by ``listing``: one broken file never hides the others.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from cairn import tickets
from cairn.errors import BadInput, CorruptState, UnknownTicket
from cairn.state.layout import FLEET_RECORD, Layout
from cairn.state.owner import with_offsets
from cairn.terms import FleetState
from cairn.util import durable
from cairn.util.procs import pid_alive, started_as

SUFFIX = FLEET_RECORD
READ_LIMIT = 256 * 1024
WHAT = "fleet record"
KNOWN_SHOWN = 10  # tickets named in an error about an unknown one


class FleetTicket(Struct, frozen=True, kw_only=True):
    ticket: str
    plan: str  # the queue file's path, relative to the repository's top level
    state: FleetState
    attempt: Annotated[int, Meta(ge=0)] = 0  # attempts started so far (run = 1, each resume +1)
    next_attempt_at: datetime | None = None  # when a retrying ticket may start again
    worktree: str | None = None  # absolute path
    branch: str | None = None  # cairn/<ticket>
    pid: int | None = None  # the child `cairn run|resume` process, while running
    pid_started_at: float | None = None  # epoch seconds
    pid_started_since_boot: float | None = None  # the same start counted from boot
    last_exit: int | None = None
    last_reason: str | None = None  # cutoff reason of the last attempt (max_turns, stall, …)
    detail: str | None = None  # one line: why failed / needs_input / interrupted
    # The key (``key_of``) of the last state the tracker and the webhooks were told of: a
    # record whose key differs was written and not told yet (its supervisor was killed in
    # between), and the next supervisor tells it. None: a record from before keys, never told
    # again.
    told: str | None = None
    # How often its attempts were counted afresh (a person's retry, a fix round, a stopped
    # ticket started again): with the attempt, it tells one start from another in its keys.
    restarts: Annotated[int, Meta(ge=0)] = 0
    updated: datetime

    def __post_init__(self) -> None:
        with_offsets(self, "next_attempt_at", "updated")
        why = tickets.problem(self.ticket)
        if why is not None:
            raise ValueError(f"ticket {self.ticket!r} is not a valid id: {why}")


# How a retrying record's detail ends (``stall; retry in 20s``): the wait as it was when the
# attempt ended. Where the time is shown live from ``next_attempt_at`` it is left out.
RETRY_IN = "; retry in "


def key_of(record: FleetTicket) -> str:
    """The idempotency key of ``record``'s state, the same however often it is told and by
    whichever supervisor: ``cairn:<ticket>:<attempt>:<state>`` (the attempt ``r<n>.<attempt>``
    once its attempts were counted afresh ``n`` times), with the reset a ``waiting``
    ticket waits for and the reason of a ``retrying`` one (a fix round is not a retry).
    Each message of the transition adds its kind (``…:comment``)."""
    attempt = f"r{record.restarts}.{record.attempt}" if record.restarts else str(record.attempt)
    parts = ["cairn", record.ticket, attempt, record.state]
    if record.state == "waiting":
        parts.append(iso(record.next_attempt_at) or "-")
    elif record.state == "retrying" and record.last_reason:
        parts.append(record.last_reason)
    return ":".join(parts)


def untold(record: FleetTicket) -> bool:
    """Whether ``record``'s state was written and the tracker not told of it."""
    return record.told is not None and record.told != key_of(record) and record.state != "queued"


def iso(when: datetime | None) -> str | None:
    """A record's time as its JSON and the supervisor's events say it; None stays None."""
    return when.isoformat() if when is not None else None


def without_retry_time(detail: str | None) -> str | None:
    """``detail`` without its written ``; retry in Ns``: one retry time per row, the live one."""
    head, sep, wait = (detail or "").rpartition(RETRY_IN)
    if sep and wait.endswith("s") and wait[:-1].replace(".", "", 1).isdigit():
        return head
    return detail


def live_state(record: FleetTicket) -> tuple[FleetState, str | None]:
    """The state ``record`` puts its ticket in now, and its one-line detail: a record that says
    running whose process is gone (the supervisor and its child were killed) is interrupted,
    for the next ``cairn fleet start`` to resume."""
    if record.state != "running" or record.pid is None or _alive(record):
        return record.state, record.detail
    return "interrupted", f"its run (pid {record.pid}) is gone; `cairn fleet start` resumes it"


def _alive(record: FleetTicket) -> bool:
    return same_process(record.pid, record.pid_started_at, record.pid_started_since_boot)


def same_process(pid: int | None, started_at: float | None, since_boot: float | None) -> bool:
    """Whether ``pid`` is alive and is the process that started at ``started_at`` (epoch s),
    ``since_boot`` seconds after boot (a start that cannot be told is taken as the same)."""
    if pid is None or not pid_alive(pid):
        return False
    return started_as(pid, started_at, since_boot) is not False


def output_paths(layout: Layout, ticket: str) -> tuple[Path, Path]:
    """Where the child run of ``ticket`` writes (its latest attempt's): its ``--json`` lines and
    its stderr, ``<state root>/fleet/output/<ticket>.jsonl`` and ``.stderr``. Files, never a
    pipe, so the run outlives its supervisor and the next one reads how it ended."""
    directory = layout.fleet_dir / "output"
    durable.check_state_dir(directory, "fleet output directory")
    name = tickets.validate(ticket)
    return directory / f"{name}.jsonl", directory / f"{name}.stderr"


def record_path(layout: Layout, ticket: str) -> Path:
    return layout.fleet_tickets_dir / f"{tickets.validate(ticket)}{SUFFIX}"


def read(layout: Layout, ticket: str) -> FleetTicket | None:
    """The record of ``ticket``; None when it has none. A broken record is CorruptState."""
    return load(record_path(layout, ticket))


def load(path: Path) -> FleetTicket | None:
    data = durable.read_state_file(path, WHAT, READ_LIMIT)
    if data is None:
        return None
    return parse(durable.decode_text(data, path, WHAT), path)


def parse(text: str, path: Path) -> FleetTicket:
    try:
        data: Any = json.loads(text)
    except ValueError:
        raise CorruptState(f"{WHAT} {path} is not valid JSON; fix it or delete it") from None
    if not isinstance(data, dict):
        raise CorruptState(f"{WHAT} {path} is not a JSON object; fix it or delete it")
    from cairn.util.invalid import problem

    try:
        record = msgspec.convert(data, FleetTicket, strict=False)
    except msgspec.ValidationError as exc:
        key, why = problem(exc, FleetTicket)
        where = key or "(top level)"
        raise CorruptState(f"{WHAT} {path}: {where}: {why}; fix it or delete it") from None
    if path.name != f"{record.ticket}{SUFFIX}":
        raise CorruptState(
            f"{WHAT} {path} is for ticket {record.ticket!r}, not {path.stem!r}; rename or delete it"
        )
    return record


def render(record: FleetTicket) -> str:
    return msgspec.json.format(msgspec.json.encode(record), indent=2).decode() + "\n"


def write(layout: Layout, record: FleetTicket) -> None:
    """Write ``record`` atomically (the old version or the new one survives any crash)."""
    path = record_path(layout, record.ticket)
    durable.ensure_dir(path.parent)
    durable.atomic_write(path, render(record))


def remove(layout: Layout, ticket: str) -> bool:
    return durable.remove(record_path(layout, ticket))


def listing(layout: Layout, warnings: list[str]) -> list[FleetTicket]:
    """Every readable record, sorted by ticket. An unreadable one (bad JSON, a wrong field, a
    symlink, a bad name) is skipped with a warning appended to ``warnings``."""
    records = []
    for _, record, problem in scan(layout):
        if problem is not None:
            warnings.append(f"{problem}; skipped")
        elif record is not None:
            records.append(record)
    return records


def scan(layout: Layout) -> Iterator[tuple[str, FleetTicket | None, str | None]]:
    """Every record file, sorted: its name (the ticket it should be), and the record or why it
    cannot be read (one line)."""
    directory = layout.fleet_tickets_dir
    for name in layout.list_fleet_tickets():
        path = directory / f"{name}{SUFFIX}"
        try:
            if tickets.problem(name) is not None:
                raise CorruptState(
                    f"{WHAT} {path} is not named after a valid ticket id; rename or delete it"
                )
            yield name, load(path), None
        except (BadInput, OSError) as exc:  # CorruptState is a BadInput
            yield name, None, str(exc) if isinstance(exc, BadInput) else f"{path}: {exc.strerror}"


def set_aside(layout: Layout, ticket: str) -> Path:
    """Move an unreadable record out of the way (``<ticket>.json.unreadable-<time>``, never
    deleted), so the ticket can have a record again; where it went."""
    path = layout.fleet_tickets_dir / f"{ticket}{SUFFIX}"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside, n = path.with_name(f"{path.name}.unreadable-{stamp}"), 1
    while os.path.lexists(aside):
        n += 1
        aside = path.with_name(f"{path.name}.unreadable-{stamp}-{n}")
    os.rename(path, aside)
    durable.fsync_dir(path.parent)
    return aside


def states(layout: Layout, warnings: list[str]) -> dict[str, FleetState]:
    """Each fleet ticket's state now (``live_state``), for ``cairn status``'s fleet column."""
    return {record.ticket: live_state(record)[0] for record in listing(layout, warnings)}


def by_ticket(layout: Layout, warnings: list[str]) -> dict[str, FleetTicket]:
    return {record.ticket: record for record in listing(layout, warnings)}


def unknown(asked: list[str], known: list[str]) -> UnknownTicket:
    """The error for tickets with no fleet record, naming the ones that have one."""
    named = ", ".join(asked)
    which = "no fleet ticket" if len(asked) == 1 else "no fleet tickets"
    if not known:
        return UnknownTicket(
            f"{which} {named}: the fleet has none yet; cairn fleet start runs the queue"
        )
    shown = ", ".join(known[:KNOWN_SHOWN])
    more = f" and {len(known) - KNOWN_SHOWN} more" if len(known) > KNOWN_SHOWN else ""
    return UnknownTicket(f"{which} {named}; the fleet's tickets are {shown}{more}")
