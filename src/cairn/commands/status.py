"""``cairn status``: one row per ticket with a marker, a snapshot or a run."""

from __future__ import annotations

from pathlib import Path

from cairn.commands.options import Json, Workspace
from cairn.output import console, emit_json, guarded


@guarded
def status(json: Json = False, workspace: Workspace = Path(".")) -> None:
    """List tickets: state, phase, round, task N/K, age, owner."""
    from cairn.status import age_text
    from cairn.status import status as rows_of

    rows = rows_of(workspace)
    if json:
        emit_json(rows)
        return
    if not rows:
        console.print("no tickets: no markers, runs or snapshots")
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in ("ticket", "state", "phase", "round", "task", "age", "owner"):
        table.add_column(column)
    for row in rows:
        task = "-"
        if row.task is not None:
            task = f"{row.task}/{row.total if row.total is not None else '?'}"
        table.add_row(
            row.ticket,
            row.state.replace("_", " "),
            row.phase or "-",
            str(row.round) if row.round is not None else "-",
            task,
            age_text(row.age_seconds),
            row.owner or "-",
        )
    console.print(table)
