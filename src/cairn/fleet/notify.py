"""Webhook notifications (``fleet.notify``): one JSON POST to each URL when a ticket ends in a
state that needs a person or is done — completed, needs review, needs input, failed, or left
interrupted with its attempts spent — never per turn, and not for a ticket a stop interrupted
(the next start resumes it); and one (event ``ticket_waiting``) when a ticket's run stopped on
its agents' usage or rate limit and it waits for the reset (``next_attempt_at``).

Each notification carries an idempotency key, the same for every delivery of the same
transition whatever the delivery and whichever supervisor makes it (``key``: the ticket, its
attempt, its state, and for ``waiting`` the reset it waits for: ``fleetstate.key_of``), in the
body and in the ``Idempotency-Key`` header. It goes through the outbox (``webhooks/``): kept
on disk before it is sent, recorded sent after, never put twice for one URL. One a killed
supervisor left with its outcome unknown is delivered again by the next, with the same key: a
webhook cannot be asked whether it got it, so the receiver drops the repeat by its key.

Each POST is sent from a thread of its own, so a slow receiver never holds the supervisor up;
a failure (no answer, 5xx, 429) is tried again twice, after 1 s and 2 s, then given up. Every
outcome is one line in ``<state root>/fleet/notify.log``; a failure also warns on stderr. Never
fatal.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cairn import __version__
from cairn.config.records import Config
from cairn.errors import CairnError
from cairn.faults import crash_at
from cairn.fleet.facts import Facts
from cairn.fleet.fleetstate import FleetTicket, iso, key_of
from cairn.fleet.outbox import Outbox, digest
from cairn.fleet.schedule import STOPPED
from cairn.state.layout import Layout
from cairn.terms import FINAL_STATES
from cairn.util import clock, durable

NOTIFIED = (FINAL_STATES - {"stopped"}) | {"waiting"}  # a person's stop is not news to them
_LOG_LOCK = threading.Lock()
Entry = tuple[Path, dict[str, Any]]  # a message in the outbox: its file, and what it holds


def wanted(record: FleetTicket) -> bool:
    """Whether ``record``'s ending is one to notify of."""
    stopped = record.state == "interrupted" and record.last_reason == STOPPED
    return record.state in NOTIFIED and not stopped


def payload(record: FleetTicket, facts: Facts, config: Config) -> dict[str, Any]:
    usage = facts.usage or {}
    port = config.fleet.dashboard_port
    return {
        "key": key_of(record),
        "event": "ticket_waiting" if record.state == "waiting" else "ticket_ended",
        "ticket": record.ticket,
        "state": record.state,
        "status_line": facts.status_line,
        "detail": record.detail,  # waiting: the limit, as the run's error line says it
        "next_attempt_at": iso(record.next_attempt_at),
        "attempt": record.attempt,
        "max_attempts": config.fleet.max_attempts,
        "branch": facts.branch,
        "snapshot": {"ref": facts.snapshot_ref, "commit": facts.snapshot},
        "run": facts.run,
        "tokens": usage.get("total_tokens"),
        "cost_usd": usage.get("cost_usd"),
        "dashboard": f"http://127.0.0.1:{port}/tickets/{record.ticket}" if port else None,
        "sent_at": clock.now().isoformat(),
    }


class Notifier:
    """POSTs a ticket's ending to ``urls``; a delivery that fails is said through ``warn``
    (the supervisor's ``ticket_warning`` event)."""

    def __init__(
        self,
        urls: list[str],
        layout: Layout | None,
        warn: Callable[[str], None],
        *,
        attempts: int = 3,
        backoff: float = 1.0,
        timeout: float = 10.0,
    ) -> None:
        self.urls = list(urls)
        self.log = layout.fleet_dir / "notify.log" if layout is not None else None
        self.outbox = Outbox(layout, [], "webhooks") if layout is not None else None
        self.attempts, self.backoff, self.timeout = attempts, backoff, timeout
        self.warn = warn

    def send(self, body: dict[str, Any]) -> list[threading.Thread]:
        """POST ``body`` to every URL not told of it yet, each from its own (non-daemon)
        thread: the process waits for them before it exits, at most ``attempts`` timeouts
        and backoffs."""
        threads = []
        for url in self.urls:
            message = {
                "ticket": body["ticket"],
                "kind": "notify",
                "key": f"{body['key']}:notify:{digest(url)}",
                "url": url,
                "body": body,
            }
            path = self.outbox.put(message) if self.outbox is not None else None
            if self.outbox is not None and path is None:
                continue  # this URL was told of this transition, or is being told
            entry = (path, message) if path is not None else None
            threads.append(self._thread(url, body, entry))
        return threads

    def flush(self) -> list[threading.Thread]:
        """Deliver again what a killed supervisor left in the outbox, with the same key; a
        message to a URL no longer in ``fleet.notify`` is dropped, said."""
        threads: list[threading.Thread] = []
        if self.outbox is None:
            return threads
        for path, message in self.outbox.pending():
            url, body = message.get("url"), message.get("body")
            if url not in self.urls or not isinstance(body, dict):
                self.outbox.drop(path)
                self.warn(f"notify: {path.name} is for {url}, not in [fleet] notify; dropped")
                continue
            threads.append(self._thread(str(url), body, (path, message)))
        for warning in self.outbox.warnings:
            self.warn(warning)
        self.outbox.warnings.clear()
        return threads

    def _thread(self, url: str, body: dict[str, Any], entry: Entry | None) -> threading.Thread:
        thread = threading.Thread(target=self.deliver, args=(url, body, entry), name="cairn-notify")
        thread.start()
        return thread

    def deliver(self, url: str, body: dict[str, Any], entry: Entry | None = None) -> bool:
        """POST ``body`` to ``url``, tried again on a failure; ``entry``: its message in the
        outbox, marked sending first and recorded sent (or dropped) after."""
        import httpx2 as httpx

        if entry is not None and self.outbox is not None:
            self.outbox.sending(*entry)
        error = ""
        for attempt in range(1, self.attempts + 1):
            try:
                response = httpx.post(
                    url,
                    json=body,
                    timeout=self.timeout,
                    headers={
                        "User-Agent": f"cairn/{__version__}",
                        "X-Cairn-Event": body["event"],
                        "Idempotency-Key": body["key"],
                    },
                )
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code < 300:
                    crash_at("fleet.notify")
                    self._record(url, body, "sent", attempt, None)
                    if entry is not None and self.outbox is not None:
                        self.outbox.sent(*entry)
                    return True
                error = f"HTTP {response.status_code}"
                if response.status_code < 500 and response.status_code != 429:
                    break  # the receiver refuses it; asking again would not change that
            if attempt < self.attempts:
                time.sleep(self.backoff * 2 ** (attempt - 1))
        self._record(url, body, "failed", attempt, error)
        if entry is not None and self.outbox is not None:
            self.outbox.drop(entry[0])
        self.warn(
            f"notify {url} of {body['ticket']} {body['state']} failed "
            f"({error}) after {attempt} tries; the fleet goes on"
        )
        return False

    def _record(
        self, url: str, body: dict[str, Any], outcome: str, tries: int, error: str | None
    ) -> None:
        if self.log is None:
            return
        line = {
            "at": clock.now().isoformat(),
            "url": url,
            "ticket": body["ticket"],
            "state": body["state"],
            "key": body["key"],
            "outcome": outcome,
            "tries": tries,
            "error": error,
        }
        try:
            with _LOG_LOCK:
                durable.ensure_dir(self.log.parent)
                durable.append_line(self.log, json.dumps(line), what="notify log")
        except (OSError, ValueError, CairnError):
            pass  # the log is a convenience; a full disk must not stop the fleet
