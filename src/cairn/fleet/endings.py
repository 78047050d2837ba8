"""What follows a ticket's end beyond its record: its branch pushed (``fleet.push``, unless the
tracker pushes it itself before opening a pull request) and the webhooks told
(``fleet.notify``). The supervisor calls ``Endings.finished`` with the final record, before the
tracker hears of it, and ``Endings.waiting`` when a run stopped on its agents' limit (the
webhooks are told that too); nothing here can fail the ticket or stop the fleet. A completed ticket
whose land waited for its fix round lands (``cairn.fleet.land``).
"""

from __future__ import annotations

from collections.abc import Callable

from cairn.config.records import Config
from cairn.fleet import land, notify
from cairn.fleet.facts import PushFailed, facts, push_branch
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.trackers.base import Tracker
from cairn.git import Repo
from cairn.state.layout import Layout


class Endings:
    def __init__(
        self,
        repo: Repo,
        config: Config,
        layout: Layout,
        tracker: Tracker,
        emit: Callable[..., None],
    ) -> None:
        self.repo, self.config, self.layout, self.tracker, self.emit = (
            repo,
            config,
            layout,
            tracker,
            emit,
        )
        urls = config.fleet.notify
        self.notifier = notify.Notifier(urls, layout, self._warn) if urls else None

    def _warn(self, message: str) -> None:
        self.emit("ticket_warning", ticket=None, message=message)

    def finished(self, record: FleetTicket) -> None:
        pushes = self.config.fleet.pushes and not self.tracker.pushes_branch
        if record.state == "completed" and pushes:
            try:
                branch = push_branch(self.repo, self.config, record.ticket)
            except PushFailed as exc:
                self.emit("ticket_push_failed", ticket=record.ticket, detail=str(exc))
            else:
                self.emit("ticket_pushed", ticket=record.ticket, branch=branch)
        self._notify(record)
        if record.state == "completed":
            self._land(record)

    def waiting(self, record: FleetTicket) -> None:
        """``record``'s run stopped on a usage or rate limit and the ticket waits for the
        reset: the webhooks hear of it (the limit, and when the ticket starts again)."""
        self._notify(record)

    def _notify(self, record: FleetTicket) -> None:
        if self.notifier is not None and notify.wanted(record):
            try:
                told = facts(self.repo, self.config, self.layout, record.ticket)
                self.notifier.send(notify.payload(record, told, self.config))
            except Exception as exc:  # a notification never fails the fleet
                self.emit("notify_failed", ticket=record.ticket, detail=str(exc))

    def _land(self, record: FleetTicket) -> None:
        try:
            done = land.after_fix_round(self.repo, self.config, self.layout, record)
        except Exception as exc:  # the wish stays: a person's land tries again
            self._warn(f"ticket {record.ticket} did not land after its fix round: {exc}")
            return
        if done is not None:
            self.emit("ticket_land", **done)
