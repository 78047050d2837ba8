"""``cairn review TICKET --comment PATH:LINE:TEXT … --request-changes|--approve``: the same
checks and the same effect as ``POST /api/v1/tickets/{id}/review`` (``cairn.fleet.comments``),
then the request carried out by the running supervisor, or by this command when none runs."""

from __future__ import annotations

import json as jsonlib
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from cairn.cli.output import say, say_warning

WAIT = 60.0  # seconds to wait for the supervisor to carry the request out
_COMMENT = re.compile(r"(.+?):(\d+):(.*)", re.DOTALL)
_FIELD = re.compile(r"comments\[(\d+)\]")


def review(
    ticket: str,
    comment: list[str],
    request_changes: bool,
    approve: bool,
    by: str | None,
    json: bool,
    workspace: Path,
) -> None:
    from cairn import tickets
    from cairn.errors import BadInput, Refused
    from cairn.fleet import comments, control, fleetcontrol, lease
    from cairn.state.layout import discover

    repo, config, layout = discover(workspace)
    ticket = tickets.validate(ticket)
    if request_changes == approve:
        raise BadInput(
            "say what the review asks: --request-changes (a fix round of the comments) or "
            "--approve, one of them"
        )
    given = [_comment(n, text) for n, text in enumerate(comment, start=1)]
    data = {
        "verdict": "request_changes" if request_changes else "approve",
        "comments": given,
        "by": by if by is not None else _who(repo.git),
    }
    try:
        asked = comments.check(data, "a person")
        answer = comments.submit(repo.git, layout, ticket, asked)
    except Refused as exc:  # the API's field names, as this command's options
        raise BadInput(_FIELD.sub(lambda m: f"--comment {int(m.group(1)) + 1}", str(exc))) from None
    deadline = time.monotonic() + WAIT
    while True:
        for warning in control.act_alone(layout, config, repo):
            say_warning(warning)
        waiting = [r for r in fleetcontrol.pending(layout, []) if r.ticket == ticket]
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    answer["pending"] = bool(waiting)
    supervised = lease.holder(layout) is not None
    _tell(answer, json, supervised)


def _comment(n: int, text: str) -> dict[str, Any]:
    from cairn.errors import BadInput

    found = _COMMENT.fullmatch(text)
    if found is None:
        raise BadInput(
            f"--comment {n} {text!r} is not PATH:LINE:TEXT; e.g. --comment "
            "'src/app.py:12:handle an empty file'"
        )
    return {"path": found.group(1), "line": int(found.group(2)), "body": found.group(3)}


def _who(git: Any) -> str:
    found = git.run(["config", "user.name"], check=False)
    name = found.text.strip() if found.ok else ""
    return name or os.environ.get("USER") or "a person"


def _tell(answer: dict[str, Any], json: bool, supervised: bool) -> None:
    if json:
        sys.stdout.write(jsonlib.dumps({"event": "ticket_review", **answer}) + "\n")
        sys.stdout.flush()
        return
    ticket = answer["ticket"]
    if answer["verdict"] == "approve":
        say(f"{ticket}: approved by {answer['by']} at {answer['commit'][:10]}")
        return
    ids = ", ".join(c["id"] for c in answer["comments"])
    runs = "the fleet supervisor runs it" if supervised else "the next cairn fleet start runs it"
    say(
        f"{ticket}: changes requested by {answer['by']}: fix round {answer['round']} of "
        f"{ids}; {runs}"
    )
