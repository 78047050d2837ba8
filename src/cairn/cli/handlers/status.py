"""``cairn status``: one row per ticket with a marker, a snapshot or a run."""

from __future__ import annotations

import sys
from pathlib import Path

from cairn.cli.output import emit_json, say, say_warning

HEADER = ("ticket", "state", "phase", "round", "task", "age", "owner")


def status(json: bool = False, workspace: Path = Path(".")) -> None:
    from cairn.fleet.fleetstate import states
    from cairn.state.status import age_text
    from cairn.state.status import status as rows_of

    warnings: list[str] = []
    rows = rows_of(workspace, warnings, states)
    for warning in warnings:  # on stderr: stdout stays the table or the JSON
        say_warning(warning)
    if json:
        emit_json(rows)
        return
    if not rows:
        say("no tickets: no markers, runs or snapshots")
        return
    fleet = any(row.fleet is not None for row in rows)  # the column shows only in a fleet
    header = (*HEADER, "fleet") if fleet else HEADER
    table: list[tuple[str, ...]] = [header]
    for row in rows:
        task = "-"
        if row.task is not None:
            task = f"{row.task}/{row.total if row.total is not None else '?'}"
        cells: tuple[str, ...] = (
            row.ticket,
            row.state.replace("_", " "),
            row.phase or "-",
            str(row.round) if row.round is not None else "-",
            task,
            age_text(row.age_seconds),
            row.owner or "-",
        )
        if fleet:
            cells = (*cells, (row.fleet or "-").replace("_", " "))
        table.append(cells)
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    text = "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    )
    sys.stdout.write(text + "\n")
    for row in rows:
        if row.state == "needs_input":
            why = f": {row.why}" if row.why else ""
            resume = f"cairn resume {row.ticket}"
            sys.stdout.write(f"{row.ticket} needs input{why}\n  once resolved: {resume}\n")
