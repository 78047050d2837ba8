"""A person's requests to pause, resume or stop one fleet ticket (``cairn fleet pause|resume|stop
TICKET``): one file each in ``<state root>/fleet/requests/``, named so that they sort in the
order they were made.

Whoever drives the fleet acts on them: the running supervisor within a tick, otherwise the
command itself, under ``<state root>/fleet/control.lock`` and only while no supervisor holds
the fleet's lease (a supervisor takes that lock once, after its lease and before it reads the
records, so it never reads a record half-way through such a change). A request stays until it
is carried out (its ticket paused, stopped or let run again, or found where the action does
not apply), so a supervisor killed half-way leaves it to the next one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from cairn import tickets
from cairn.state.layout import Layout
from cairn.terms import ASKERS, FLEET_ACTIONS, Asker, FleetAction
from cairn.util import clock, durable

REQUESTS = "requests"
LOCK = "control.lock"
READ_LIMIT = 4096


class Request(NamedTuple):
    path: Path
    ticket: str
    action: FleetAction
    at: str  # when it was made (ISO 8601)
    signalled: bool  # its run was sent SIGTERM by a command acting with no supervisor
    by: Asker = "cli"  # who asked: the command line, the dashboard, the JSON API
    detail: str | None = None  # the record's detail once done (a fix round: who asked, what)


def requests_dir(layout: Layout) -> Path:
    path = layout.fleet_dir / REQUESTS
    durable.check_state_dir(path, "fleet requests directory")
    return path


def ask(
    layout: Layout,
    ticket: str,
    action: FleetAction,
    by: Asker = "cli",
    detail: str | None = None,
) -> Request:
    """Write the request to ``action`` ``ticket``, as ``by`` asked it (``detail``: the
    record's, once done)."""
    directory = requests_dir(layout)
    durable.ensure_dir(directory)
    at = clock.now().isoformat()
    path = directory / f"{time.time_ns():020d}-{os.getpid()}-{tickets.validate(ticket)}.json"
    request = Request(path, ticket, action, at, False, by, detail)
    _write(request)
    return request


def signalled(request: Request) -> Request:
    """``request``, noting that its run was sent SIGTERM (a second one would not wait for the
    agent's grace period)."""
    marked = request._replace(signalled=True)
    _write(marked)
    return marked


def _write(request: Request) -> None:
    data: dict[str, Any] = {
        "ticket": request.ticket,
        "action": request.action,
        "at": request.at,
        "by": request.by,
    }
    if request.signalled:
        data["signalled"] = True
    if request.detail is not None:
        data["detail"] = request.detail
    durable.atomic_write(request.path, json.dumps(data) + "\n")


def pending(layout: Layout, warnings: list[str]) -> list[Request]:
    """Every request not carried out yet, oldest first. One that cannot be read (no JSON, an
    unknown action, an invalid ticket id) is removed with a warning appended to ``warnings``:
    it can never be done."""
    try:
        names = sorted(n for n in os.listdir(requests_dir(layout)) if n.endswith(".json"))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    directory = requests_dir(layout)
    for name in names:
        path = directory / name
        try:
            found.append(_read(path))
        except (OSError, ValueError) as exc:
            if isinstance(exc, FileNotFoundError):
                continue  # carried out meanwhile
            durable.remove(path)
            warnings.append(f"fleet request {path} cannot be read ({exc}); removed")
    return found


def _read(path: Path) -> Request:
    data = durable.read_state_file(path, "fleet request", READ_LIMIT)
    if data is None:
        raise FileNotFoundError(path)
    raw: Any = json.loads(durable.decode_text(data, path, "fleet request"))
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    ticket, action = raw.get("ticket"), raw.get("action")
    if not isinstance(ticket, str) or tickets.problem(ticket) is not None:
        raise ValueError(f"ticket {ticket!r} is not a ticket id")
    by: Asker = next((asker for asker in ASKERS if asker == raw.get("by")), "cli")
    for known in FLEET_ACTIONS:
        if action == known:
            at = str(raw.get("at", ""))
            detail = raw.get("detail")
            said = detail if isinstance(detail, str) else None
            signalled = raw.get("signalled") is True
            return Request(path, ticket, known, at, signalled, by, said)
    raise ValueError(f"action {action!r} is not one of {', '.join(FLEET_ACTIONS)}")


def done(request: Request) -> None:
    """The request is carried out: it goes."""
    durable.remove(request.path)


def still_pending(request: Request) -> bool:
    return request.path.exists()


def wait_unlocked(layout: Layout) -> None:
    """Wait until a command that changes records with no supervisor has finished (a new
    supervisor calls it after taking its lease, before it reads the records)."""
    with locked(layout):
        pass


@contextlib.contextmanager
def locked(layout: Layout) -> Iterator[None]:
    """Hold the lock under which fleet records are changed without a supervisor."""
    directory = layout.fleet_dir
    durable.ensure_dir(directory)
    with durable.locked(directory / LOCK):
        yield


@contextlib.contextmanager
def signals_counted(count: Callable[[], None]) -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM call ``count`` (the supervisor's graceful
    stop counts them) instead of their default action; in the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        count()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            # A stop signal that comes after the loop (a second SIGTERM while the process
            # exits) must not kill it with the default action and lose the exit code.
            signal.signal(signum, signal.SIG_IGN if old == signal.SIG_DFL else old)
