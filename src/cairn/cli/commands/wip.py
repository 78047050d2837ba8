"""``cairn wip``: save, list, show, diff, restore, prune and push snapshots."""

from __future__ import annotations

from cairn.cli.parsing import Parser, as_path, integer, json_flag, ticket, workspace

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from cairn.git.status import Early


def save(parser: Parser, early: Early | None = None) -> None:
    """Snapshot tracked, staged and untracked (not ignored) files; touches nothing else."""
    ticket(parser)
    parser.add_argument("-r", "--reason", default="manual", help="Why the snapshot is taken.")
    parser.add_argument("--run", help="Run id to record.")
    parser.add_argument(
        "--timeout-ms",
        type=integer(minimum=1),
        metavar="N",
        help="Time budget (default agent.cutoff_timeout_ms).",
    )
    json_flag(parser)
    workspace(parser, text=True)
    args = parser.parse()
    from cairn.cli.handlers import wip

    wip.save(**vars(args), early=early)


def list_(parser: Parser) -> None:
    """List snapshots, newest first: time, reason, base, files, commit."""
    ticket(parser)
    parser.add_argument(
        "-n", "--limit", type=integer(minimum=0), default=20, help="Per ticket; 0 = all."
    )
    json_flag(parser)
    workspace(parser)
    args = parser.parse()
    from cairn import wip
    from cairn.cli.output import emit_json, say, say_warning

    json, limit = args.json, args.limit

    warnings: list[str] = []
    found = wip.list_snapshots(
        args.workspace, ticket=args.ticket, limit=limit or None, warnings=warnings
    )
    for warning in warnings:  # on stderr: stdout stays the table or the JSON
        say_warning(warning)
    if json:
        emit_json(found)
        return
    if not found:
        say("no snapshots" + (f" for ticket {args.ticket}" if args.ticket else ""))
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
        say(
            "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True))
            + "  "
            + row[-1]
        )


def show(parser: Parser) -> None:
    """Show a snapshot's metadata and its diffstat against its base."""
    parser.add_argument("snapshot", help="Ticket id, ticket~N, or commit.")
    json_flag(parser)
    workspace(parser)
    args = parser.parse()
    from cairn import wip
    from cairn.cli.handlers.wip import skipped_line
    from cairn.cli.output import emit_json, say, say_warning

    json = args.json
    warnings: list[str] = []
    result = wip.show(args.workspace, args.snapshot, warnings=warnings)
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
        say(f"{key:>8}  {value}")
    for path in snap.conflicted:
        say(f"  conflicted {path}")
    for item in snap.skipped:
        say(skipped_line(item))
    for stat in result.diffstat:
        change = "binary" if stat.added is None else f"+{stat.added} -{stat.deleted}"
        say(f"  {change:>14}  {stat.path}")


def diff(parser: Parser) -> None:
    """Patch from A's base to A, or from A to B."""
    parser.add_argument("a", metavar="A", help="Snapshot (ticket, ticket~N or commit).")
    parser.add_argument("b", metavar="B", nargs="?", help="Second snapshot or commit.")
    parser.add_argument("--stat", action="store_true", help="Only the diffstat.")
    json_flag(parser)
    workspace(parser)
    args = parser.parse()
    import sys

    from cairn import wip
    from cairn.cli.output import emit_json

    text = wip.diff(args.workspace, args.a, args.b, stat=args.stat)
    if args.json:
        emit_json({"a": args.a, "b": args.b, "stat": args.stat, "diff": text})
        return
    sys.stdout.write(text)


def restore(parser: Parser) -> None:
    """Bring a snapshot back without destroying anything (a safety snapshot comes first)."""
    parser.add_argument("snapshot", help="Ticket id, ticket~N, or commit.")
    parser.add_argument(
        "--to", type=as_path, metavar="DIR", help="Materialise into this new directory instead."
    )
    parser.add_argument("--dry-run", action="store_true", help="Only say what would change.")
    parser.add_argument(
        "--force", action="store_true", help="Also overwrite paths no snapshot can hold."
    )
    ticket(parser)
    json_flag(parser)
    workspace(parser)
    args = parser.parse()
    from cairn import wip
    from cairn.cli.handlers.wip import skipped_line
    from cairn.cli.output import emit_json, say

    json, dry_run = args.json, args.dry_run
    said: list[str] = []
    result = wip.restore(
        args.workspace,
        args.snapshot,
        to=args.to,
        dry_run=dry_run,
        force=args.force,
        ticket=args.ticket,
        warnings=said,
    )
    if said:  # the config's, first among the result's
        import msgspec

        result = msgspec.structs.replace(result, warnings=[*said, *result.warnings])
    if json:
        emit_json(result)
        return
    verb = "would restore" if dry_run else "restored"
    say(
        f"{verb} {result.commit[:12]} into {result.target}: "
        f"{len(result.written)} written, {len(result.deleted)} deleted"
    )
    if dry_run:
        for path in result.written:
            say(f"  write  {path}")
        for path in result.deleted:
            say(f"  delete {path}")
        for path in result.obstacles:
            say(f"  would overwrite (not in any snapshot) {path}")
    if result.safety_commit:
        say(
            f"  safety snapshot {result.safety_commit[:12]}; undo with: "
            f"cairn wip restore {result.safety_commit}"
        )
    for item in result.skipped_in_snapshot:
        say(skipped_line(item) + " — not in the snapshot")
    for warning in result.warnings:
        say(f"  warning: {warning}")


def prune(parser: Parser) -> None:
    """Delete the refs of tickets whose latest snapshot is older (never runs git gc)."""
    parser.add_argument(
        "--older-than",
        default="14d",
        metavar="<duration>",
        help="Age of a ticket's latest snapshot, with a unit: 90s, 30m, 24h, 14d, 2w.",
    )
    parser.add_argument("--dry-run", action="store_true", help="Only list what would go.")
    json_flag(parser)
    workspace(parser)
    args = parser.parse()
    from cairn import wip
    from cairn.cli.output import emit_json, say
    from cairn.errors import BadInput
    from cairn.util.durations import format_duration, parse_duration
    from cairn.util.text import counted, human_bytes

    dry_run = args.dry_run
    try:
        seconds = parse_duration(args.older_than)
    except ValueError as exc:
        raise BadInput(f"--older-than: {exc}") from None
    result = wip.prune(args.workspace, older_than=seconds, dry_run=dry_run)
    if args.json:
        emit_json(result)
        return
    verb = "would prune" if dry_run else "pruned"
    for item in result.pruned:
        say(f"{verb} {item.ticket} at {item.commit} (last snapshot {item.last_snapshot})")
    say(
        f"{verb} {counted(len(result.pruned), 'ticket')} older than {format_duration(seconds)}, "
        f"kept {result.kept}; snapshots use {human_bytes(result.disk_bytes_after)} "
        f"(was {human_bytes(result.disk_bytes_before)}; git gc reclaims the rest later)"
    )


def push(parser: Parser) -> None:
    """Push refs/cairn/wip/* so snapshots outlive a deleted workspace."""
    parser.add_argument("remote", nargs="?", default="origin", help="Remote name or URL.")
    parser.add_argument("--force", action="store_true", help="Overwrite diverged remote refs.")
    json_flag(parser)
    workspace(parser)
    args = parser.parse()
    from cairn import wip
    from cairn.cli.output import emit_json, say
    from cairn.util.text import counted

    remote = args.remote
    result = wip.push(args.workspace, remote=remote, force=args.force)
    if args.json:
        emit_json(result)
        return
    say(
        f"pushed {counted(len(result.pushed), 'snapshot ref')} to {remote}"
        f" ({len(result.up_to_date)} already up to date)"
    )
