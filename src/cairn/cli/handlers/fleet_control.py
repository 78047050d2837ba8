"""``cairn fleet pause|resume|stop TICKET…`` on the embedded engine: check every ticket first (a
typo, or a ticket where the action does not apply, changes nothing), leave a request for each
ticket it changes, and wait until the requests are carried out (by the running supervisor,
else by this command itself)."""

from __future__ import annotations

import json as jsonlib
import sys
import time
from pathlib import Path
from typing import Any

from cairn.cli.output import say, say_warning
from cairn.terms import FleetAction

WAIT = 60.0  # seconds to wait for the new states, as on the temporal engine
DONE_STATES = {"pause": ("paused",), "stop": ("stopped",), "resume": ("queued", "retrying")}


def control(action: FleetAction, names: list[str], wait: bool, json: bool, workspace: Path) -> None:
    from cairn import tickets
    from cairn.fleet import control, fleetcontrol, fleetstate, lease, steer
    from cairn.state.layout import discover
    from cairn.state.status import snapshot_refs

    repo, config, layout = discover(workspace)
    checked = steer.check(layout, config, action, [tickets.validate(name) for name in names])
    _say(checked.warnings)
    asked, records = checked.asked, checked.records
    requests = steer.file(layout, checked, action, "cli")
    _say(checked.warnings)
    deadline = time.monotonic() + (WAIT if wait else 0.0)
    while True:
        _say(control.act_alone(layout, config))
        if time.monotonic() >= deadline:
            break
        if not any(fleetcontrol.still_pending(r) for r in requests.values()):
            break
        time.sleep(0.1)
    snapshots = snapshot_refs(repo, config)
    supervised = lease.holder(layout) is not None
    for ticket in asked:
        record = fleetstate.read(layout, ticket) or records[ticket]
        state: str = fleetstate.live_state(record)[0]
        request = requests.get(ticket)
        pending = request is not None and fleetcontrol.still_pending(request)
        kind = "ticket_unchanged"
        if pending and state == "running":
            kind, state = f"ticket_{action}", control.CUTTING[action]
        elif pending or (request is not None and state in (*DONE_STATES[action], "running")):
            kind = f"ticket_{action}"
        shown = {
            "ticket": ticket,
            "state": state,
            "pending": pending,
            "snapshot": snapshots.get(ticket, ("", 0))[0][:10] or None,
            "detail": record.detail,
        }
        _emit(json, kind, shown, supervised)


def _emit(json: bool, kind: str, fields: dict[str, Any], supervised: bool) -> None:
    if json:
        sys.stdout.write(jsonlib.dumps({"event": kind, **fields}) + "\n")
        sys.stdout.flush()
        return
    ticket, state = fields["ticket"], str(fields["state"])
    snapshot = f", snapshot {fields['snapshot']}" if fields["snapshot"] else ""
    if kind == "ticket_unchanged":
        text = f"{ticket}: unchanged ({state.replace('_', ' ')})"
    elif state in ("pausing", "stopping"):
        text = f"{ticket}: {state} (its run is still saving a snapshot)"
    elif fields["pending"]:
        text = f"{ticket}: asked ({state}); the fleet supervisor acts on it within a second"
    elif kind == "ticket_pause":
        text = f"{ticket}: paused{snapshot}; cairn fleet resume {ticket} lets it run again"
    elif kind == "ticket_stop":
        text = f"{ticket}: stopped{snapshot}; the next cairn fleet start starts it again"
    else:
        later = "" if supervised or state == "running" else "; the next cairn fleet start runs it"
        text = f"{ticket}: resumed ({state}){later}"
    say(text)


def retry(names: list[str], fresh_config: bool, json: bool, workspace: Path) -> None:
    """``cairn fleet retry TICKET…`` on the embedded engine: every ticket checked first (one
    that cannot be retried changes nothing), then with ``--fresh-config`` the base branch's
    ``cairn.toml`` committed onto each ticket branch, then each ticket queued again."""
    from cairn import tickets
    from cairn.fleet import control, fleetcontrol, fleetstate, lease, steer
    from cairn.fleet import retry as fleet_retry
    from cairn.state.layout import discover

    repo, config, layout = discover(workspace)
    checked = steer.check(layout, config, "retry", [tickets.validate(name) for name in names])
    _say(checked.warnings)
    asked, records = checked.asked, checked.records
    base = fleet_retry.base_of(repo, config)
    if fresh_config:
        for ticket in asked:
            fleet_retry.check_fresh(repo, records[ticket], base)
        said = {t: fleet_retry.take_fresh(repo, records[t], base) for t in asked}
    else:
        said = {t: fleet_retry.used(records[t], base) for t in asked}
    requests = steer.file(layout, checked, "retry", "cli")
    _say(checked.warnings)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        _say(control.act_alone(layout, config))
        if not any(fleetcontrol.still_pending(r) for r in requests.values()):
            break
        time.sleep(0.1)
    supervised = lease.holder(layout) is not None
    for ticket in asked:
        record = fleetstate.read(layout, ticket) or records[ticket]
        fields = {
            "ticket": ticket,
            "was": records[ticket].state,
            "state": fleetstate.live_state(record)[0],
            "pending": fleetcontrol.still_pending(requests[ticket]),
            "config": said[ticket],
            "fresh_config": fresh_config,
        }
        if json:
            sys.stdout.write(jsonlib.dumps({"event": "ticket_retried", **fields}) + "\n")
            sys.stdout.flush()
            continue
        later = (
            "the fleet supervisor runs it" if supervised else "the next cairn fleet start runs it"
        )
        say(
            f"{ticket}: retried ({fields['was']}): {fields['state']}, resuming its run; {later}; "
            f"config: {said[ticket]}"
        )


def _say(warnings: list[str]) -> None:
    """Warnings on stderr, as they come: stdout stays the report or the JSON lines."""
    for warning in warnings:
        say_warning(warning)
    warnings.clear()
