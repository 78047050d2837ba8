"""The outbox: every effect the fleet has outside the repository, on disk until it is done,
and done once.

Each message (a comment, a label change, a pull request, an approving review, a webhook
notification) is one JSON file in ``<state root>/fleet/outbox/`` (the tracker's) or a channel
under it (``webhooks/``), written atomically before it is sent and removed once sent; a
message that fails stays, and is sent again at the next poll (a killed supervisor's messages
are sent by the next one). Files are named by the time they were written, so a ticket's
messages go out in the order they were made.

Each message has an idempotency key (``cairn.fleet.fleetstate.key_of`` and its kind: the
ticket, its attempt and its state, whatever the delivery). A key once sent is written to the
ticket's ledger, ``outbox/sent/<ticket>.keys``; a message whose key is pending or in the ledger
is not put again, so a transition told twice (its supervisor died before it recorded telling
it) has its effects once. A message is marked ``sending`` before its request goes out: one
found so (the process died, or the answer was lost) has an ``unknown`` outcome, and its sender
looks for it (a comment by the key hidden in it, a pull request by its branch) before it
sends it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cairn import tickets
from cairn.errors import BadInput
from cairn.faults import crash_at
from cairn.state.layout import Layout
from cairn.util import durable

READ_LIMIT = 256 * 1024
LEDGER_LIMIT = 16 * 1024 * 1024
_LEDGER_LOCK = threading.Lock()


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def hidden(key: str) -> str:
    """``key`` as a comment or review hides it at its end: an HTML comment, not shown."""
    return f"<!-- {key} -->"


def unknown(message: dict[str, Any]) -> bool:
    """Whether ``message``'s request may have gone out: its outcome is looked for first."""
    return bool(message.get("sending"))


class Outbox:
    """Messages kept until they are sent; what it sets aside is said in ``warnings`` (the
    tracker's)."""

    def __init__(self, layout: Layout, warnings: list[str], channel: str | None = None) -> None:
        base = layout.fleet_dir / "outbox"
        self.directory = base / channel if channel else base
        self.ledger = base / "sent"
        self.warnings = warnings
        self._last = 0
        self._sent: dict[str, set[str]] = {}

    def put(self, message: dict[str, Any]) -> Path | None:
        """Keep ``message`` (which names its ``ticket``, ``kind`` and ``key``) until it is sent;
        None when a message of its key is pending or was sent: it is not kept twice."""
        key = message.get("key")
        if isinstance(key, str) and self.known(message["ticket"], key):
            return None
        stamp = max(time.time_ns(), self._last + 1)  # strictly increasing, so in order
        self._last = stamp
        tail = f"-{digest(key)}" if isinstance(key, str) else ""
        path = self.directory / f"{stamp:020d}-{message['ticket']}-{message['kind']}{tail}.json"
        durable.ensure_dir(self.directory)
        durable.atomic_write(path, json.dumps(message, indent=2) + "\n")
        return path

    def known(self, ticket: str, key: str) -> bool:
        """Whether a message of ``key`` is pending or was sent."""
        if key in self.sent_keys(ticket):
            return True
        ending = f"-{digest(key)}.json"
        try:
            return any(n.endswith(ending) for n in os.listdir(self.directory))
        except (FileNotFoundError, NotADirectoryError):
            return False

    def sent_keys(self, ticket: str) -> set[str]:
        if ticket not in self._sent:
            path = self._ledger_of(ticket)
            try:
                data = durable.read_state_file(path, "outbox ledger", LEDGER_LIMIT)
            except (OSError, BadInput) as exc:
                self.warnings.append(f"outbox ledger {path}: {exc}; read as empty")
                data = None
            lines = (data or b"").decode("utf-8", "replace").splitlines()
            self._sent[ticket] = {line for line in lines if line}
        return self._sent[ticket]

    def _ledger_of(self, ticket: str) -> Path:
        return self.ledger / f"{tickets.validate(ticket)}.keys"

    def pending(self) -> list[tuple[Path, dict[str, Any]]]:
        """Every message not sent yet, oldest first. One that cannot be read is set aside
        (renamed ``*.bad``) with a warning: it never blocks the others."""
        try:
            names = sorted(n for n in os.listdir(self.directory) if n.endswith(".json"))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for name in names:
            path = self.directory / name
            try:
                data = durable.read_state_file(path, "outbox message", READ_LIMIT)
                if data is None:
                    continue  # sent meanwhile (by another thread of this process)
                message = json.loads(data)
                if not isinstance(message, dict) or "kind" not in message:
                    raise ValueError("not a message")
            except (OSError, ValueError, BadInput) as exc:
                self.warnings.append(f"outbox {path}: {exc}; set aside as .bad")
                os.replace(path, path.with_suffix(".bad"))
                continue
            found.append((path, message))
        return found

    def flush(
        self,
        send: Callable[[dict[str, Any], bool], None],
        failures: tuple[type[Exception], ...],
        *,
        blocked: Callable[[], bool],
        held: Callable[[Exception], None],
        warn: Callable[[str], None],
    ) -> None:
        """Send what the box holds, oldest first, each through ``send(message, looked)``
        (``looked``: its outcome is unknown, so it is looked for first). A ticket whose message
        fails (one of ``failures``) keeps its later ones back, in order, and the message its
        ``tries`` and ``last_error``; ``held`` hears the failure (a rate limit), and nothing
        is sent while ``blocked()``."""
        waiting: set[str] = set()
        for path, message in self.pending():
            ticket = message["ticket"]
            if blocked():
                return
            if ticket in waiting:
                continue
            try:
                looked = unknown(message)
                self.sending(path, message)
                send(message, looked)
            except failures as exc:
                message["tries"] = int(message.get("tries", 0)) + 1
                message["last_error"] = str(exc)
                self.update(path, message)
                waiting.add(ticket)
                held(exc)
                warn(f"{message['kind']} for {ticket} failed ({exc}); sent again at the next poll")
            else:
                self.sent(path, message)

    def update(self, path: Path, message: dict[str, Any]) -> None:
        durable.atomic_write(path, json.dumps(message, indent=2) + "\n")

    def sending(self, path: Path, message: dict[str, Any]) -> None:
        """``message``'s request is about to go out: from now on its outcome is unknown until
        it is recorded sent."""
        if not message.get("sending"):
            message["sending"] = True
            self.update(path, message)
        crash_at("fleet.sending")

    def sent(self, path: Path, message: dict[str, Any]) -> None:
        """``message`` is done: its key goes to the ledger, then its file goes."""
        key = message.get("key")
        if isinstance(key, str):
            ticket = message["ticket"]
            with _LEDGER_LOCK:
                keys = self.sent_keys(ticket)
                if key not in keys:
                    durable.ensure_dir(self.ledger)
                    durable.append_line(self._ledger_of(ticket), key, what="outbox ledger")
                    keys.add(key)
        durable.remove(path)

    def drop(self, path: Path) -> None:
        """Give ``path``'s message up (its receiver refused it): removed, not in the ledger."""
        durable.remove(path)


CHANNELS = (None, "webhooks")  # the tracker's outbox, and the webhooks'


def counts(layout: Layout) -> dict[str, dict[str, int]]:
    """Per ticket, how many of its messages wait in the outboxes (``pending``) and how many
    of them have an unknown outcome (``unknown``), for ``cairn fleet status``; read only (an
    unreadable message is counted, not set aside)."""
    found: dict[str, dict[str, int]] = {}
    for channel in CHANNELS:
        directory = Outbox(layout, [], channel).directory
        try:
            names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            try:
                data = durable.read_state_file(directory / name, "outbox message", READ_LIMIT)
                message = json.loads(data or b"{}")
                ticket = str(message["ticket"])
            except (OSError, ValueError, BadInput, KeyError, TypeError):
                continue
            mine = found.setdefault(ticket, {"pending": 0, "unknown": 0})
            mine["pending"] += 1
            mine["unknown"] += unknown(message)
    return found


def annotate(layout: Layout, rows: list[dict[str, Any]]) -> None:
    """Give each row of a ticket with messages still to send an ``outbox`` entry (``pending``,
    ``unknown``): ``cairn fleet status`` and the dashboard show what is not told yet."""
    waiting = counts(layout)
    for row in rows:
        found = waiting.get(row.get("ticket") or "")
        if found is not None:
            row["outbox"] = found
