"""``cairn fleet land TICKET…``: the same checks and the same effect as ``POST
/api/v1/tickets/{id}/land`` (``cairn.fleet.land``); a conflict's fix round is then carried out
by the running supervisor, or by this command when none runs."""

from __future__ import annotations

import json as jsonlib
import sys
from pathlib import Path
from typing import Any

from cairn.cli.output import say, say_warning
from cairn.errors import ExitCode

SHORT = 10


def land(tickets: list[str], json: bool, workspace: Path) -> ExitCode:
    from cairn import tickets as ticket_ids
    from cairn.fleet import control, lease
    from cairn.fleet import land as landing
    from cairn.state.layout import discover

    repo, config, layout = discover(workspace)
    asked = [ticket_ids.validate(name) for name in tickets]
    done = landing.land(repo, config, layout, asked, "cli")
    if any(not d["landed"] for d in done):
        for warning in control.act_alone(layout, config):
            say_warning(warning)
    supervised = lease.holder(layout) is not None
    for answer in done:
        _tell(answer, json, supervised)
    return ExitCode.OK if all(d["landed"] for d in done) else ExitCode.FAILURE


def _tell(answer: dict[str, Any], json: bool, supervised: bool) -> None:
    if json:
        sys.stdout.write(jsonlib.dumps({"event": "ticket_land", **answer}) + "\n")
        sys.stdout.flush()
        return
    ticket, base = answer["ticket"], answer["base"]
    if answer["landed"]:
        how = {"already": "already there", "fast_forward": "a fast-forward"}
        said = how.get(answer["how"], f"merge {answer['merge'][:SHORT]}")
        say(f"{ticket}: landed on {base} ({said})")
        return
    runs = "the fleet supervisor runs it" if supervised else "the next cairn fleet start runs it"
    say(
        f"{ticket}: conflicts with {base} in {', '.join(answer['conflicts'])}: fix round "
        f"{answer['round']} asked of its agent ({runs}); it lands once that passes"
    )
