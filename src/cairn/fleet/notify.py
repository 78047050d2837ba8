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

Each URL gets its service's native message (``cairn.fleet.chatformats``: Slack, Discord,
Microsoft Teams), as ``[fleet] notify`` sets or its host says (``cairn.config.webhooks``), or
this JSON. What needs a person (``attention``: ``cairn.terms.NEEDS_YOU_STATES``) goes to
``[fleet] notify_attention`` (the ``notify`` URLs when it is not set), with what to do; the
rest (news) to ``notify``; a URL in both gets each transition once (``routes``). A 429 waits
for its ``Retry-After`` (or Discord's ``retry_after``); a webhook its service says is gone
(Slack's 404 and 410, Discord's 404) is given up for this supervisor, warned once.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from cairn import __version__
from cairn.config import webhooks
from cairn.config.records import Config, FleetConfig
from cairn.errors import CairnError
from cairn.faults import crash_at
from cairn.fleet import chatformats, pulls
from cairn.fleet.facts import Facts
from cairn.fleet.fleetstate import FleetTicket, iso, key_of
from cairn.fleet.outbox import Outbox, digest
from cairn.fleet.schedule import STOPPED
from cairn.state.layout import Layout
from cairn.terms import FINAL_STATES, NEEDS_YOU_STATES, TO_DO, Attention, ChatFormat
from cairn.util import clock, durable

# a person's stop is not news to them; a ticket held for the fleet's budget needs them
NOTIFIED = (FINAL_STATES - {"stopped"}) | {"waiting", "budget"}
_LOG_LOCK = threading.Lock()
Entry = tuple[Path, dict[str, Any]]  # a message in the outbox: its file, and what it holds
GONE: dict[ChatFormat, frozenset[int]] = {  # the answers that mean the webhook is no more
    "slack": frozenset({404, 410}),
    "discord": frozenset({404}),
}
RETRY_AFTER_CAP = 60.0  # seconds: the longest a 429's Retry-After is waited for
# a waiting ticket's limit, as its detail names it (cairn.agents.limits.describe)
LIMIT_WORDS: dict[str, str] = {"usage limit": "usage_limit", "rate limit": "rate_limit"}
ALL: frozenset[Attention] = frozenset({"needs_you", "news"})


class Route(NamedTuple):
    """A webhook, its message format, and the kinds of notification it gets."""

    url: str
    format: ChatFormat
    kinds: frozenset[Attention]


def routes(fleet: FleetConfig) -> list[Route]:
    """Where each notification goes: every kind to the ``notify`` URLs when
    ``notify_attention`` is not set; else the news to ``notify`` and the needs to
    ``notify_attention``. A URL listed twice is one route (the format of its first entry)."""
    attention = fleet.notify_attention
    news: frozenset[Attention] = ALL if attention is None else frozenset({"news"})
    listed = [(entry, news) for entry in fleet.notify]
    listed += [(entry, frozenset({"needs_you"})) for entry in attention or []]
    found: dict[str, Route] = {}
    for entry, kinds in listed:
        url, format = webhooks.target(entry)
        known = found.get(url)
        found[url] = (
            Route(url, format, kinds)
            if known is None
            else known._replace(kinds=known.kinds | kinds)
        )
    return list(found.values())


def attention(record: FleetTicket) -> Attention:
    """Whether ``record``'s state needs a person or is news (``attention_of``)."""
    return attention_of(record.state, record.detail, record.last_reason)


def attention_of(state: str, detail: str | None, last_reason: str | None) -> Attention:
    """Whether a ticket in ``state`` needs a person or is news: a ``waiting`` ticket needs one
    on a usage limit (no fallback agent could take over; a rate limit passes by itself)."""
    if state == "waiting":  # the detail says the limit waited for now; else the cutoff
        said = [kind for words, kind in LIMIT_WORDS.items() if words in (detail or "")]
        limit = said[0] if said else last_reason
        return "needs_you" if limit == "usage_limit" else "news"
    return "needs_you" if state in NEEDS_YOU_STATES else "news"


def wanted(record: FleetTicket) -> bool:
    """Whether ``record``'s ending is one to notify of."""
    return wanted_of(record.state, record.last_reason)


def wanted_of(state: str, last_reason: str | None) -> bool:
    stopped = state == "interrupted" and last_reason == STOPPED
    return state in NOTIFIED and not stopped


def dashboard_link(config: Config, ticket: str) -> str | None:
    """The ticket's dashboard page: under ``dashboard_url`` when set, else on 127.0.0.1."""
    base, port = config.fleet.dashboard_url, config.fleet.dashboard_port
    if base:
        return f"{base.rstrip('/')}/tickets/{ticket}"
    return f"http://127.0.0.1:{port}/tickets/{ticket}" if port else None


def issue_link(config: Config, ticket: str) -> str | None:
    """The tracker's issue of ``ticket``: GitHub's ``GH-N`` on ``[fleet.github] repo``."""
    github = config.fleet.github
    number = re.fullmatch(r"GH-(\d+)", ticket)
    if config.fleet.tracker != "github" or github.repo is None or number is None:
        return None
    api = github.api_url.rstrip("/")
    site = "https://github.com" if api == "https://api.github.com" else api.removesuffix("/api/v3")
    return f"{site}/{github.repo}/issues/{number.group(1)}"


def payload(
    record: FleetTicket, facts: Facts, config: Config, layout: Layout | None = None
) -> dict[str, Any]:
    """The notification of ``record``'s state: every fact a message of any format says."""
    usage = facts.usage or {}
    pull = pulls.read(layout, record.ticket) if layout is not None else None
    need = attention(record)
    to_do = TO_DO.get(record.state) if need == "needs_you" else None
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
        "dashboard": dashboard_link(config, record.ticket),
        "pull_request": pull["url"] if pull is not None else None,
        "issue": issue_link(config, record.ticket),
        "attention": need,
        "to_do": to_do.format(ticket=record.ticket) if to_do else None,
        "sent_at": clock.now().isoformat(),
    }


class Notifier:
    """POSTs a ticket's ending to its ``routes``; a delivery that fails is said through
    ``warn`` (the supervisor's ``ticket_warning`` event)."""

    def __init__(
        self,
        routes: list[Route],
        layout: Layout | None,
        warn: Callable[[str], None],
        *,
        attempts: int = 3,
        backoff: float = 1.0,
        timeout: float = 10.0,
    ) -> None:
        self.routes = list(routes)
        self.gone: set[str] = set()  # webhooks their service said are no more
        self.log = layout.fleet_dir / "notify.log" if layout is not None else None
        self.outbox = Outbox(layout, [], "webhooks") if layout is not None else None
        self.attempts, self.backoff, self.timeout = attempts, backoff, timeout
        self.warn = warn

    def send(self, body: dict[str, Any]) -> list[threading.Thread]:
        """POST ``body`` to every route of its kind not told of it yet, each from its own
        (non-daemon) thread: the process waits for them before it exits, at most ``attempts``
        timeouts and backoffs."""
        threads = []
        kind = body.get("attention") or "needs_you"
        for route in self.routes:
            url = route.url
            if kind not in route.kinds or url in self.gone:
                continue
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
            threads.append(self._thread(route, body, entry))
        return threads

    def flush(self) -> list[threading.Thread]:
        """Deliver again what a killed supervisor left in the outbox, with the same key; a
        message to a URL no longer in ``fleet.notify`` is dropped, said."""
        threads: list[threading.Thread] = []
        if self.outbox is None:
            return threads
        by_url = {route.url: route for route in self.routes}
        for path, message in self.outbox.pending():
            url, body = message.get("url"), message.get("body")
            route = by_url.get(str(url))
            if route is None or not isinstance(body, dict):
                self.outbox.drop(path)
                self.warn(
                    f"notify: {path.name} is for {url}, not in [fleet] notify or "
                    "notify_attention; dropped"
                )
                continue
            threads.append(self._thread(route, body, (path, message)))
        for warning in self.outbox.warnings:
            self.warn(warning)
        self.outbox.warnings.clear()
        return threads

    def _thread(self, route: Route, body: dict[str, Any], entry: Entry | None) -> threading.Thread:
        args = (route, body, entry)
        thread = threading.Thread(target=self.deliver, args=args, name="cairn-notify")
        thread.start()
        return thread

    def deliver(self, route: Route, body: dict[str, Any], entry: Entry | None = None) -> bool:
        """POST ``body``, in ``route``'s format, to its URL, tried again on a failure;
        ``entry``: its message in the outbox, marked sending first and recorded sent (or
        dropped) after."""
        import httpx2 as httpx

        if entry is not None and self.outbox is not None:
            self.outbox.sending(*entry)
        url, error, gone = route.url, "", False
        posted = chatformats.render(route.format, body)
        for attempt in range(1, self.attempts + 1):
            wait = self.backoff * 2 ** (attempt - 1)
            try:
                response = httpx.post(
                    url,
                    json=posted,
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
                code = response.status_code
                error = f"HTTP {code}"
                if code == 429:
                    wait = max(wait, retry_after(response))
                elif code < 500:
                    gone = code in GONE.get(route.format, ())
                    break  # the receiver refuses it; asking again would not change that
            if attempt < self.attempts:
                time.sleep(wait)
        self._record(url, body, "failed", attempt, error)
        if entry is not None and self.outbox is not None:
            self.outbox.drop(entry[0])
        if gone:
            if url not in self.gone:  # said once; the webhook is not asked again
                self.gone.add(url)
                self.warn(
                    f"notify {url}: {route.format} says the webhook is gone ({error}); no more "
                    "messages to it until the next fleet start; fix [fleet] notify"
                )
            return False
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


def retry_after(response: Any) -> float:
    """How long a 429 asks to wait, in seconds: its ``Retry-After`` header, or the
    ``retry_after`` of Discord's JSON body; at most ``RETRY_AFTER_CAP``, 0 when it says none."""
    said: Any = response.headers.get("Retry-After")
    if said is None:
        try:
            found = response.json()
        except ValueError:
            found = None
        said = found.get("retry_after") if isinstance(found, dict) else None
    try:
        seconds = float(said)
    except (TypeError, ValueError):
        return 0.0
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)
