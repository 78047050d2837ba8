"""``cairn wip``: save, list, show, diff, restore, prune and push snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec
import typer

from cairn.cli.commands.options import Json, TicketOpt, Workspace
from cairn.cli.handlers import wip as handler
from cairn.cli.handlers.wip import skipped_line
from cairn.cli.output import console, emit_json, guarded, say_warning
from cairn.errors import BadInput
from cairn.util.durations import format_duration, parse_duration
from cairn.util.text import counted, human_bytes

app = typer.Typer(
    help="Snapshots of uncommitted work under refs/cairn/wip/<ticket>.", no_args_is_help=True
)


@app.command()
@guarded
def save(
    ticket: TicketOpt = None,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why the snapshot is taken.")] = (
        "manual"
    ),
    run: Annotated[str | None, typer.Option("--run", help="Run id to record.")] = None,
    timeout_ms: Annotated[
        int | None,
        typer.Option("--timeout-ms", min=1, help="Time budget (default agent.cutoff_timeout_ms)."),
    ] = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Snapshot tracked, staged and untracked (not ignored) files; touches nothing else."""
    handler.save(**locals())


@app.command("list")
@guarded
def list_(
    ticket: TicketOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="Per ticket; 0 = all.")] = 20,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """List snapshots, newest first: time, reason, base, files, commit."""
    from cairn import wip

    warnings: list[str] = []
    found = wip.list_snapshots(workspace, ticket=ticket, limit=limit or None, warnings=warnings)
    for warning in warnings:  # on stderr: stdout stays the table or the JSON
        say_warning(warning)
    if json:
        emit_json(found)
        return
    if not found:
        console.print("no snapshots" + (f" for ticket {ticket}" if ticket else ""))
        return
    rows = [("ticket", "#", "time", "reason", "base", "files", "commit")]
    for snap in found:
        files = str(snap.files_changed)
        if snap.skipped_count:
            files += f" (+{snap.skipped_count} skipped)"
        base = snap.base[:12] if snap.base else "-"
        rows.append(
            (snap.ticket, str(snap.seq), snap.time, snap.reason, base, files, snap.commit[:12])
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        console.print(
            "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True))
            + "  "
            + row[-1]
        )


@app.command()
@guarded
def show(
    snapshot: Annotated[str, typer.Argument(help="Ticket id, ticket~N, or commit.")],
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Show a snapshot's metadata and its diffstat against its base."""
    from cairn import wip

    warnings: list[str] = []
    result = wip.show(workspace, snapshot, warnings=warnings)
    for warning in warnings:  # on stderr: stdout stays the table or the JSON
        say_warning(warning)
    if json:
        emit_json(result)
        return
    snap = result.snapshot
    rows = [
        ("commit", snap.commit),
        ("ticket", f"{snap.ticket} #{snap.seq}"),
        ("time", snap.time),
        ("reason", snap.reason),
        ("base", snap.base or "(no commit yet)"),
        ("branch", snap.branch or "(detached)"),
        ("staged", snap.index_tree or "(conflicted)"),
        ("files", str(snap.files_changed)),
    ]
    if snap.run:
        rows.append(("run", snap.run))
    for key, value in rows:
        console.print(f"{key:>8}  {value}")
    for path in snap.conflicted:
        console.print(f"  conflicted {path}")
    for item in snap.skipped:
        console.print(skipped_line(item))
    for stat in result.diffstat:
        change = "binary" if stat.added is None else f"+{stat.added} -{stat.deleted}"
        console.print(f"  {change:>14}  {stat.path}")


@app.command()
@guarded
def diff(
    a: Annotated[str, typer.Argument(help="Snapshot (ticket, ticket~N or commit).")],
    b: Annotated[str | None, typer.Argument(help="Second snapshot or commit.")] = None,
    stat: Annotated[bool, typer.Option("--stat", help="Only the diffstat.")] = False,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Patch from A's base to A, or from A to B."""
    from cairn import wip

    text = wip.diff(workspace, a, b, stat=stat)
    if json:
        emit_json({"a": a, "b": b, "stat": stat, "diff": text})
        return
    typer.echo(text, nl=False)


@app.command()
@guarded
def restore(
    snapshot: Annotated[str, typer.Argument(help="Ticket id, ticket~N, or commit.")],
    to: Annotated[
        Path | None, typer.Option("--to", help="Materialise into this new directory instead.")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would change.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Also overwrite paths no snapshot can hold.")
    ] = False,
    ticket: TicketOpt = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Bring a snapshot back without destroying anything (a safety snapshot comes first)."""
    from cairn import wip

    said: list[str] = []
    result = wip.restore(
        workspace, snapshot, to=to, dry_run=dry_run, force=force, ticket=ticket, warnings=said
    )
    if said:  # the config's, first among the result's
        result = msgspec.structs.replace(result, warnings=[*said, *result.warnings])
    if json:
        emit_json(result)
        return
    verb = "would restore" if dry_run else "restored"
    console.print(
        f"{verb} {result.commit[:12]} into {result.target}: "
        f"{len(result.written)} written, {len(result.deleted)} deleted"
    )
    if dry_run:
        for path in result.written:
            console.print(f"  write  {path}")
        for path in result.deleted:
            console.print(f"  delete {path}")
        for path in result.obstacles:
            console.print(f"  would overwrite (not in any snapshot) {path}")
    if result.safety_commit:
        console.print(
            f"  safety snapshot {result.safety_commit[:12]}; undo with: "
            f"cairn wip restore {result.safety_commit}"
        )
    for item in result.skipped_in_snapshot:
        console.print(skipped_line(item) + " — not in the snapshot")
    for warning in result.warnings:
        console.print(f"  warning: {warning}")


@app.command()
@guarded
def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="<duration>",
            help="Age of a ticket's latest snapshot, with a unit: 90s, 30m, 24h, 14d, 2w.",
        ),
    ] = "14d",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would go.")] = False,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Delete the refs of tickets whose latest snapshot is older (never runs git gc)."""
    from cairn import wip

    try:
        seconds = parse_duration(older_than)
    except ValueError as exc:
        raise BadInput(f"--older-than: {exc}") from None
    result = wip.prune(workspace, older_than=seconds, dry_run=dry_run)
    if json:
        emit_json(result)
        return
    verb = "would prune" if dry_run else "pruned"
    for item in result.pruned:
        console.print(f"{verb} {item.ticket} at {item.commit} (last snapshot {item.last_snapshot})")
    console.print(
        f"{verb} {counted(len(result.pruned), 'ticket')} older than {format_duration(seconds)}, "
        f"kept {result.kept}; snapshots use {human_bytes(result.disk_bytes_after)} "
        f"(was {human_bytes(result.disk_bytes_before)}; git gc reclaims the rest later)"
    )


@app.command()
@guarded
def push(
    remote: Annotated[str, typer.Argument(help="Remote name or URL.")] = "origin",
    force: Annotated[bool, typer.Option("--force", help="Overwrite diverged remote refs.")] = False,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Push refs/cairn/wip/* so snapshots outlive a deleted workspace."""
    from cairn import wip

    result = wip.push(workspace, remote=remote, force=force)
    if json:
        emit_json(result)
        return
    console.print(
        f"pushed {counted(len(result.pushed), 'snapshot ref')} to {remote}"
        f" ({len(result.up_to_date)} already up to date)"
    )
