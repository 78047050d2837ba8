"""The supervisor's part that keeps tickets off agents at a usage or rate limit: a ticket
whose run stopped on one waits (``waiting``) until the soonest reset of its chain's agents, and
no ticket starts while every agent of the chain is at a limit (``cairn.state.limited``); the
rules are ``cairn.fleet.schedule``'s (``soonest``, ``blocked``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from cairn.config.records import Config
from cairn.errors import BadInput
from cairn.fleet import schedule
from cairn.fleet.endings import Endings
from cairn.fleet.fleetstate import FleetTicket, iso
from cairn.fleet.trackers import Tracker
from cairn.run import chain
from cairn.state import limited
from cairn.state.layout import Layout
from cairn.state.limited import Held


def agents_of(config: Config) -> list[str]:
    """The names of the agents every ticket's run may use, the primary first; BadInput for a
    fallback that names no agent. None at all without ``agent.kind``: each run refuses itself
    then, and its ticket fails with that line."""
    try:
        return chain.resolve(config, None).names()
    except BadInput:
        if config.agent.kind is None:
            return []
        raise


class LimitWaiting:
    """What the supervisor does about its agents' limits (``Supervisor`` is one)."""

    chain: list[str]
    layout: Layout
    tracker: Tracker
    endings: Endings
    emit: Callable[..., None]

    limit_warned: set[str]

    def _save(self, record: FleetTicket, **changes: Any) -> FleetTicket:
        raise NotImplementedError

    def _tell(self, record: FleetTicket) -> FleetTicket:
        raise NotImplementedError

    def _warn(self, warnings: list[tuple[str | None, str]]) -> None:
        raise NotImplementedError

    def _held(self, now: datetime) -> list[Held]:
        """The agents at a limit now; a limit record that cannot be read is said once (it
        holds nothing)."""
        unread: list[str] = []
        found = limited.all_held(self.layout, now, unread)
        fresh = [message for message in unread if message not in self.limit_warned]
        self.limit_warned.update(fresh)
        if fresh:
            self._warn([(None, message) for message in fresh])
        return found

    def _reset_of(self, now: datetime) -> Held | None:
        """The limit of the chain's agents that resets first, among those held now."""
        return schedule.soonest(self.chain, self._held(now))

    def _limited(self, due: list[FleetTicket], now: datetime) -> bool:
        """Whether every agent of the chain is at a limit now: then the ``due`` tickets wait
        as ``waiting`` until the soonest reset (none starts only to run into the limit)."""
        held = schedule.blocked(self.chain, self._held(now))
        if held is None:
            return False
        detail = schedule.limit_detail(held, now)
        for record in due:
            self._wait(record, held.resets_at, detail, reason=held.limit, agent=held.agent)
        return True

    def _stopped_on_limit(
        self, record: FleetTicket, verdict: schedule.Verdict, reason: str | None, held: Held | None
    ) -> None:
        """``record``'s run stopped on a limit (``verdict``: waiting until the reset): the
        ticket waits, and the webhooks hear of it."""
        agent = held.agent if held is not None else None
        detail = verdict.detail
        self._wait(record, verdict.next_attempt_at, detail, reason=reason, agent=agent)

    def _wait(
        self,
        record: FleetTicket,
        until: datetime | None,
        detail: str | None,
        *,
        reason: str | None,
        agent: str | None,
    ) -> FleetTicket:
        """``record``'s ticket waits for an agent's limit to reset: told to the tracker and
        the webhooks, and said (``ticket_waiting``)."""
        record = self._save(record, state="waiting", next_attempt_at=until, detail=detail)
        record = self._tell(record)
        self.emit(
            "ticket_waiting",
            ticket=record.ticket,
            attempt=record.attempt,
            reason=reason,
            agent=agent,
            next_attempt_at=iso(until),
            detail=detail,
        )
        return record
