"""The fleet's spend against ``[fleet] max_cost_usd``: the sum of its tickets' run costs.

A ticket's cost is the sum over its runs of what each run's change summary records (its
``usage`` front matter, updated as each dispatch ends, every session of the run); a run whose
summary has no cost is looked up in its journal, where a dispatch that reported no cost makes
the ticket's cost unknown (counted as nothing, and said so). The supervisor reads every ticket
once as it starts, a ticket again when its attempt ends, and its running tickets at most once a
second; once the spend reaches the cap it tells each running run (SIGUSR2: the turn in flight
finishes, then the run stops as a ``budget`` cutoff, resumable) and starts nothing more.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple, Protocol

from cairn.config.records import FleetConfig
from cairn.errors import CairnError
from cairn.state import accounting, journal, status
from cairn.state.layout import Layout

READ_EVERY = 1.0  # seconds between two reads of the running tickets' costs


class Signalled(Protocol):
    def signal(self, sig: signal.Signals) -> bool: ...


class Spend(NamedTuple):
    cost: float  # what is known, in USD
    unknown: int  # tickets some of whose cost is unknown


def ticket_cost(layout: Layout, ticket: str) -> tuple[float, bool]:
    """What ``ticket``'s runs cost (USD) as far as it is known, and whether some is unknown."""
    cost, unknown = 0.0, False
    for run_id in layout.list_runs(ticket):
        run_dir = layout.run_dir(ticket, run_id)
        usage = status.run_usage(str(run_dir))
        if usage is not None and usage["cost_usd"] is not None:
            cost += usage["cost_usd"]
            continue
        try:
            events, _ = journal.read(run_dir)
        except (CairnError, OSError):
            unknown = True
            continue
        for done in accounting.dispatches(events):
            spent = done["usage"]["cost_usd"] if done["usage"] is not None else None
            if spent is None:
                unknown = True
            else:
                cost += spent
    return cost, unknown


def dollars(amount: float) -> str:
    return f"${amount:,.2f}"


class FleetBudget:
    def __init__(self, config: FleetConfig, layout: Layout) -> None:
        self.cap = config.max_cost_usd or None  # 0: no limit
        self.layout = layout
        self.costs: dict[str, tuple[float, bool]] = {}
        self.read_at = 0.0
        self.said = False  # the `waiting` line for the budget was emitted

    def read(self, tickets: Iterable[str]) -> None:
        """Read the costs of ``tickets`` (nothing is read without a cap)."""
        if self.cap is None:
            return
        for ticket in tickets:
            try:
                self.costs[ticket] = ticket_cost(self.layout, ticket)
            except (CairnError, OSError):
                self.costs[ticket] = (self.costs.get(ticket, (0.0, True))[0], True)

    def spend(self) -> Spend:
        known = sum(cost for cost, _ in self.costs.values())
        return Spend(round(known, 6), sum(1 for _, unknown in self.costs.values() if unknown))

    def fields(self) -> dict[str, object]:
        """The ``fleet_budget`` event's fields (without a cap, the spend is not read: null)."""
        spend = self.spend()
        if self.cap is None:
            return {"max_cost_usd": None, "spent_usd": None, "unknown": None}
        return {"max_cost_usd": self.cap, "spent_usd": spend.cost, "unknown": spend.unknown}

    def note(self) -> str | None:
        """Why nothing may start for the fleet's budget; None while it allows."""
        if self.cap is None:
            return None
        spend = self.spend()
        if spend.cost < self.cap:
            return None
        return (
            f"waiting: the fleet has spent {dollars(spend.cost)}{unknown_text(spend.unknown)}, "
            f"its budget fleet.max_cost_usd is {dollars(self.cap)}; raise it and start the "
            "fleet again"
        )

    def tick(self, running: Mapping[str, Signalled], emit: Callable[..., None]) -> str | None:
        """Read the running tickets' costs (at most once a second); when the spend reached the
        cap, tell each running run, again at each read (a run still starting may miss it), and
        say so once. The note, or None while the budget allows."""
        if self.cap is None:
            return None
        now = time.monotonic()
        fresh = now - self.read_at >= READ_EVERY
        if fresh:
            self.read_at = now
            self.read(running)
        note = self.note()
        if note is not None and (fresh or not self.said):
            for child in running.values():
                child.signal(signal.SIGUSR2)
        if note is not None and not self.said:
            self.said = True
            emit("waiting", message=note)
        return note


def unknown_text(count: int) -> str:
    if not count:
        return ""
    return f" (the cost of {count} ticket{'s' if count != 1 else ''} is unknown)"


def line(fields: Mapping[str, object]) -> str:
    """The ``fleet_budget`` event for people."""
    cap, spent, unknown = fields["max_cost_usd"], fields["spent_usd"], fields["unknown"]
    if not isinstance(cap, float | int):
        return "no fleet cost limit"
    assert isinstance(spent, float | int) and isinstance(unknown, int)
    return f"fleet budget: {dollars(cap)} ({dollars(spent)} spent so far{unknown_text(unknown)})"
