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
from cairn.fleet import land, notify, schedule
from cairn.fleet.facts import facts, push_branch
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.trackers.base import Tracker
from cairn.git import Repo
from cairn.remote.refs import PushFailed
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
        routes = notify.routes(config.fleet)
        self.notifier = notify.Notifier(routes, layout, self._warn) if routes else None

    def _warn(self, message: str) -> None:
        self.emit("ticket_warning", ticket=None, message=message)

    def tell(self, record: FleetTicket) -> None:
        """Tell the webhooks and the tracker of ``record``'s state, as ``finished`` or
        ``waiting`` and a transition, or an end: the one way a state leaves the fleet. Every
        message is keyed by the state (``fleetstate.key_of``), so a state told again (its
        supervisor died before it recorded telling it) has its effects once."""
        state = record.state
        if state == "waiting":
            self.waiting(record)
        elif state not in ("running", "approved"):
            self.finished(record)  # push, notify: before the tracker opens a pull request
        if state in ("running", "approved", "waiting") or schedule.ahead(self.config.fleet, record):
            self.tracker.transition(record.ticket, state, record.detail)
        else:
            self.tracker.finish(record.ticket, state)

    def flush(self) -> None:
        """Deliver the webhooks' messages a killed supervisor left (the tracker's are sent at
        its next poll)."""
        if self.notifier is not None:
            self.notifier.flush()

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
                self.notifier.send(notify.payload(record, told, self.config, self.layout))
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
