"""``cairn fleet status``: one row per fleet ticket, from the files (no supervisor needed)."""

from __future__ import annotations

import contextlib
import json as json_lib
import sys
from pathlib import Path
from typing import Any

from cairn.cli.output import say, say_warning
from cairn.errors import CairnError, ExitCode

HEADER = ("ticket", "state", "phase", "task", "attempt", "turns", "snapshot", "worktree", "last")


def status(
    json: bool = False,
    workspace: Path = Path("."),
    engine: str | None = None,
    attention: bool = False,
) -> ExitCode | None:
    """``cairn fleet status`` on the engine ``--engine`` names, else the configured one;
    ``--attention``: only what needs a person (the embedded engine's)."""
    from cairn.cli.handlers.engines import engine as engine_for

    if attention:
        return needing(json, workspace)
    return engine_for(engine, workspace).status(json, workspace)


def needing(json: bool, workspace: Path) -> ExitCode | None:
    """``cairn fleet status --attention``: the tickets that need you, oldest first, each with
    how long it has waited and what to do, and the time to unblock so far."""
    from cairn.fleet import needs
    from cairn.fleet.fleetstatus import fleet_status
    from cairn.state import journal
    from cairn.state.layout import discover
    from cairn.state.status import age_text
    from cairn.util import clock
    from cairn.util.text import counted

    discovered = discover(workspace)
    layout = discovered[2]
    rows, warnings = fleet_status(workspace, discovered)
    for warning in dict.fromkeys(warnings):
        say_warning(warning)
    queue = needs.queue(rows, clock.now())
    met: list[dict[str, Any]] = []
    for row in rows:
        run = row.get("run")
        if isinstance(run, str) and isinstance(row.get("ticket"), str):
            with contextlib.suppress(OSError, CairnError):
                events, _ = journal.read(layout.run_dir(row["ticket"], run))
                met += [e for e in events if e.get("event") == "need_met"]
    unblocked = needs.unblocked(met)
    if json:
        sys.stdout.write(json_lib.dumps({"needs_you": queue, "unblocked": unblocked}) + "\n")
        return None
    if not queue:
        say("nothing needs you now")
    else:
        say("needs you (oldest first):")
        width = max(len(n["ticket"]) for n in queue)
        for need in queue:
            waited = age_text(need["waited_s"]) if need["waited_s"] is not None else "?"
            state = need["state"].replace("_", " ")
            say(f"  {need['ticket'].ljust(width)}  {state}, waiting {waited}")
            if need["detail"]:
                say(f"    {need['detail']}")
            if need["to_do"]:
                say(f"    to do: {need['to_do']}")
    if unblocked is not None:
        say(
            f"time to unblock: median {age_text(unblocked['median_s'])}, longest "
            f"{age_text(unblocked['longest_s'])} over {counted(unblocked['needs_met'], 'need')} met"
        )
    return None


def embedded(json: bool, workspace: Path) -> ExitCode | None:
    """The embedded engine's rows, read from this repository's fleet files."""
    from cairn.fleet.fleetstatus import fleet_status, held_now
    from cairn.fleet.refusals import REFUSED
    from cairn.state.layout import discover
    from cairn.util import clock

    discovered = discover(workspace)
    rows, warnings = fleet_status(workspace, discovered)
    held = held_now(discovered[2], clock.now(), warnings)
    for warning in dict.fromkeys(warnings):  # on stderr: stdout stays the table or the JSON array
        say_warning(warning)
    if json:
        from cairn.cli.output import json_text

        sys.stdout.write((json_text(rows) if rows else json_lib.dumps([])) + "\n")
        return None
    if not rows:
        say("no fleet tickets: `cairn fleet start` runs the plans in the queue")
        for line in _held_lines(held):
            say(line)
        return None
    from cairn.state.status import age_text

    table = [HEADER]
    for row in rows:
        if row["state"] == REFUSED:  # what the tracker's last poll could not take, and why
            table.append((row["ticket"] or row["plan"], REFUSED, *"-" * (len(HEADER) - 2)))
            continue
        task = "-"
        if row["task"] is not None or row["total"] is not None:
            done = row["task"] if row["task"] is not None else "-"
            task = f"{done}/{row['total'] or '?'}"
        attempt = str(row["attempt"])
        if row["max_attempts"] is not None:
            attempt += f"/{row['max_attempts']}"
        turns = "-"
        if row["turn"] is not None:
            turns = f"{row['turn']}/{row['max_turns'] if row['max_turns'] is not None else '?'}"
        snapshot = "-"
        if row["snapshot"] is not None:
            snapshot = f"{row['snapshot'][:7]} {age_text(row['snapshot_age_seconds'])}"
        last = "-"
        if row["last_event"] is not None:
            last = f"{row['last_event']} {age_text(row['last_event_age_seconds'])}"
        table.append(
            (
                row["ticket"],
                row["state"].replace("_", " "),
                row["phase"] or "-",
                task,
                attempt,
                turns,
                snapshot,
                row["worktree"] or "-",
                last,
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    ]
    details = [f"  {row['ticket'] or row['plan']}: {note}" for row in rows if (note := _note(row))]
    sys.stdout.write("\n".join(lines + details + _held_lines(held) + _outbox(rows)) + "\n")
    return None


def _outbox(rows: list[dict[str, Any]]) -> list[str]:
    """The messages not sent yet to the tracker and the webhooks, a line per ticket."""
    from cairn.util.text import counted

    lines = []
    for row in rows:
        waiting = row.get("outbox") or {}
        if waiting.get("pending"):
            unsure = waiting["unknown"]
            also = (
                f" ({unsure} unknown: the request went out and its answer was lost; looked "
                "for before it is sent again)"
                if unsure
                else ""
            )
            many = counted(waiting["pending"], "message")
            lines.append(f"  {row['ticket']}: {many} to send{also}")
    return ["not told yet (sent at the next poll):", *lines] if lines else []


def _held_lines(held: list[dict[str, Any]]) -> list[str]:
    """The agents at a limit now, a line each: ``scripted: usage limit, resets 14:00 UTC``."""
    if not held:
        return []
    from datetime import datetime

    from cairn.agents.limits import when
    from cairn.util import clock

    now = clock.now()
    lines = ["agents at a limit now (no run starts on them before the reset):"]
    for h in held:
        at = when(datetime.fromisoformat(h["resets_at"]), now)
        guess = "" if h["reset_known"] else " (a guess: the agent did not say)"
        lines.append(f"  {h['agent']}: {h['limit'].replace('_', ' ')}, resets {at}{guess}")
    return lines


def _note(row: dict[str, Any]) -> str | None:
    """The line under the table: the row's detail, and when a retrying or waiting ticket starts
    again."""
    parts = [row["detail"]] if row["detail"] else []
    if row["state"] in ("retrying", "waiting") and row["next_attempt_at"] is not None:
        from datetime import datetime

        from cairn.fleet.fleetstate import without_retry_time
        from cairn.state.status import age_text
        from cairn.util import clock

        parts = [part for part in [without_retry_time(row["detail"])] if part]  # one retry time
        at = datetime.fromisoformat(row["next_attempt_at"])
        wait = int((at - clock.now()).total_seconds())
        parts.append(f"next attempt in {age_text(wait)}" if wait > 0 else "next attempt due")
    return "; ".join(parts) or None
