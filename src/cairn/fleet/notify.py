"""Webhook notifications (``fleet.notify``): one JSON POST to each URL when a ticket ends in a
state that needs a person or is done — completed, needs review, needs input, failed, or left
interrupted with its attempts spent — never per turn, and not for a ticket a stop interrupted
(the next start resumes it); and one (event ``ticket_waiting``) when a ticket's run stopped on
its agents' usage or rate limit and it waits for the reset (``next_attempt_at``).

Each notification carries an idempotency key, the same for every delivery of the same
transition whatever the attempt (``key``: the ticket, its run, its state, and for ``waiting`` the
reset it waits for), in the body and in the ``Idempotency-Key`` header, so a receiver can drop
a repeat (a retried POST whose answer was lost, a supervisor that died before it logged it).

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
from typing import Any

from cairn import __version__
from cairn.config.records import Config
from cairn.errors import CairnError
from cairn.fleet.facts import Facts
from cairn.fleet.fleetstate import FleetTicket, iso
from cairn.fleet.schedule import STOPPED
from cairn.state.layout import Layout
from cairn.terms import FINAL_STATES
from cairn.util import clock, durable

NOTIFIED = (FINAL_STATES - {"stopped"}) | {"waiting"}  # a person's stop is not news to them
_LOG_LOCK = threading.Lock()


def wanted(record: FleetTicket) -> bool:
    """Whether ``record``'s ending is one to notify of."""
    stopped = record.state == "interrupted" and record.last_reason == STOPPED
    return record.state in NOTIFIED and not stopped


def key(record: FleetTicket, run: str | None) -> str:
    """The notification's idempotency key: ``cairn:<ticket>:<run>:<state>[:<reset>]``, one
    for a transition however often it is told."""
    parts = ["cairn", record.ticket, run or "-", record.state]
    if record.state == "waiting":
        parts.append(iso(record.next_attempt_at) or "-")
    return ":".join(parts)


def payload(record: FleetTicket, facts: Facts, config: Config) -> dict[str, Any]:
    usage = facts.usage or {}
    port = config.fleet.dashboard_port
    return {
        "key": key(record, facts.run),
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
        self.attempts, self.backoff, self.timeout = attempts, backoff, timeout
        self.warn = warn

    def send(self, body: dict[str, Any]) -> list[threading.Thread]:
        """POST ``body`` to every URL, each from its own (non-daemon) thread: the process
        waits for them before it exits, at most ``attempts`` timeouts and backoffs."""
        threads = []
        for url in self.urls:
            thread = threading.Thread(target=self.deliver, args=(url, body), name="cairn-notify")
            thread.start()
            threads.append(thread)
        return threads

    def deliver(self, url: str, body: dict[str, Any]) -> bool:
        import httpx2 as httpx

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
                    self._record(url, body, "sent", attempt, None)
                    return True
                error = f"HTTP {response.status_code}"
                if response.status_code < 500 and response.status_code != 429:
                    break  # the receiver refuses it; asking again would not change that
            if attempt < self.attempts:
                time.sleep(self.backoff * 2 ** (attempt - 1))
        self._record(url, body, "failed", attempt, error)
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
