"""A person's ask of fleet tickets on the embedded engine (pause, resume, stop, retry), from the
command line (``cairn fleet pause T``), the dashboard's buttons or its JSON API: one path for the
three.

``check`` looks at every ticket first: an unknown one raises ``UnknownTicket``, one whose state
does not allow the action ``NotApplicable`` (``control.decide`` is the rule), and nothing is
changed then. ``file`` leaves a request for each ticket the action changes
(``cairn.fleet.fleetcontrol``) and writes the ask in the ticket's journal with who asked. The
running supervisor carries the requests out within a tick; with none, ``control.act_alone``
does (the command waits for it, the dashboard returns at once).
"""

from __future__ import annotations

from typing import NamedTuple

from cairn.config.records import Config
from cairn.errors import CairnError, NotApplicable
from cairn.fleet import control, fleetcontrol, fleetstate, lease
from cairn.fleet.fleetcontrol import Request
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.trackers.base import Command
from cairn.state.layout import Layout
from cairn.terms import Asker, FleetAction


class Checked(NamedTuple):
    """The tickets asked, in order and without repeats, their records and the decision for
    each; the warnings met reading the records."""

    asked: list[str]
    records: dict[str, FleetTicket]
    decisions: dict[str, control.Decision]
    warnings: list[str]

    def changing(self) -> list[str]:
        """The tickets the action changes (the others are where it takes them already)."""
        return [t for t in self.asked if self.decisions[t].state is not None]


def check(layout: Layout, config: Config, action: FleetAction, names: list[str]) -> Checked:
    """Every ticket in ``names`` (valid ids) checked for ``action``, before anything changes."""
    warnings: list[str] = []
    asked = list(dict.fromkeys(names))
    records = fleetstate.by_ticket(layout, warnings)
    missing = [ticket for ticket in asked if ticket not in records]
    if missing:
        raise fleetstate.unknown(missing, sorted(records))
    supervised = lease.holder(layout) is not None
    decisions = {t: control.decide(action, records[t], config, supervised) for t in asked}
    for decision in decisions.values():
        if decision.refusal is not None:
            raise NotApplicable(decision.refusal)
    return Checked(asked, records, decisions, warnings)


def file(layout: Layout, checked: Checked, action: FleetAction, by: Asker) -> dict[str, Request]:
    """A request for each ticket ``action`` changes, each ask journalled with ``by``; a journal
    that cannot take it is said in ``checked.warnings`` (the request stands)."""
    from cairn.fleet import needs
    from cairn.util import clock

    requests = {}
    for ticket in checked.changing():
        requests[ticket] = fleetcontrol.ask(layout, ticket, action, by)
        if by != "fleet":  # a person met the ticket's need, if it had one: time to unblock
            needs.met(layout, checked.records[ticket], action, by, clock.now())
        why = journal_ask(layout, ticket, action, by)
        if why is not None:
            checked.warnings.append(why)
    return requests


def journal_ask(layout: Layout, ticket: str, action: FleetAction, by: Asker) -> str | None:
    """``asked`` in the journal of the ticket's run: what was asked and by whom."""
    from cairn.fleet.needs import journal

    return journal(layout, ticket, "asked", action=action, by=by)


def answer(
    layout: Layout, config: Config, ticket: str, text: str, who: str, by: Asker
) -> dict[str, Request]:
    """A person's answer to a fleet ticket that stopped for input (``needs_input``): written in
    its run's journal (``cairn.run.answers``), then its run resumed as ``retry`` asks, where
    the supervisor (or ``control.act_alone``) resumes it with the answer in its prompt. Checked
    first: a ticket the fleet cannot retry, or whose run does not wait for input, is refused and
    nothing is written."""
    from cairn.run import answers

    checked = check(layout, config, "retry", [ticket])
    record = checked.records[ticket]
    if record.state != "needs_input":
        raise NotApplicable(
            f"ticket {ticket} is {record.state.replace('_', ' ')}, not waiting for input; "
            f"there is nothing to answer"
        )
    answers.record(layout, ticket, text, who)
    return file(layout, checked, "retry", by)


# A `/cairn` command's verbs (cairn.fleet.slash), and the fleet actions two of them are.
VERBS = ("answer", "retry", "stop")
ACTIONS: dict[str, FleetAction] = {"retry": "retry", "stop": "stop"}


def carry_out(layout: Layout, config: Config, command: Command) -> str:
    """Do a person's ``/cairn`` ``command`` (``cairn.fleet.slash``); the reply that says what
    was done, or why not."""
    ticket = command.ticket
    if not command.allowed:
        return f"@{command.who}: only people who can write to the repository can steer cairn."
    if command.verb not in VERBS:
        known = ", ".join(f"`/cairn {v}`" for v in VERBS)
        return f"@{command.who}: `/cairn {command.verb}` is not a command; the commands: {known}."
    try:
        if command.verb == "answer":
            answer(layout, config, ticket, command.text, command.who, "tracker")
            return f"@{command.who}: answered; the run of {ticket} resumes with your answer."
        action = ACTIONS[command.verb]
        file(layout, check(layout, config, action, [ticket]), action, "tracker")
    except (CairnError, OSError) as exc:
        return f"@{command.who}: `/cairn {command.verb}` was not done: {exc}"
    then = {"retry": "its run resumes", "stop": "its run stops with a snapshot"}[command.verb]
    return f"@{command.who}: {command.verb} asked; {then}."
