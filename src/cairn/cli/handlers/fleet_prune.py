"""``cairn fleet prune [TICKET] [--all-finished] [--dry-run] [--json]``: remove ticket worktrees
that hold nothing that exists nowhere else; refuse, and say what, for the others.

Exit 0 when every worktree asked for was removed (or would be, or had none), 1 when any was
refused or kept (its work is safe where it is), 2 on bad input.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from cairn.cli.output import emit_json, say, say_warning
from cairn.errors import BadInput, ExitCode
from cairn.util.text import human_bytes

SHOWN = 10


def prune(
    ticket: str | None = None,
    all_finished: bool = False,
    dry_run: bool = False,
    json: bool = False,
    workspace: Path = Path("."),
) -> ExitCode:
    from cairn import tickets
    from cairn.fleet import prune as pruning
    from cairn.state.layout import discover

    if (ticket is None) == (not all_finished):
        raise BadInput(
            "give one TICKET or --all-finished (not both); see `cairn fleet status` for tickets"
        )
    repo, config, layout = discover(workspace)
    if ticket is not None:
        names = [pruning.known(repo, config, layout, tickets.validate(ticket))]
    else:
        said: list[str] = []
        names = pruning.finished_tickets(layout, config, said)
        for warning in said:  # on stderr: stdout stays the report or the JSON
            say_warning(warning)
    reports = [pruning.prune(repo, config, t, dry_run=dry_run, layout=layout) for t in names]
    failed = any(r.action in ("refused", "kept") for r in reports)
    code = ExitCode.FAILURE if failed else ExitCode.OK
    if json:
        emit_json(
            {
                "dry_run": dry_run,
                "freed_bytes": sum(r.freed_bytes for r in reports),
                "tickets": [msgspec.to_builtins(r) for r in reports],
            }
        )
        return code
    if not reports:
        say("no finished tickets: nothing to prune")
    for report in reports:
        _print(report)
    if len(reports) > 1 and not dry_run:
        say(f"freed {human_bytes(sum(r.freed_bytes for r in reports))} in all")
    return code


def _held(report: object) -> str:
    """What the snapshot taken before the removal holds: the uncommitted files and HEAD."""
    from cairn.fleet.prune import PruneReport
    from cairn.util.text import counted

    assert isinstance(report, PruneReport)
    files = counted(report.saved_files or 0, "uncommitted file")
    head = f"HEAD {report.head[:12]}" if report.head else "no commit"
    return f"its {files} and {head}"


def _print(report: object) -> None:
    from cairn.fleet.prune import PruneReport

    assert isinstance(report, PruneReport)
    name, where = report.ticket, report.worktree
    snap = f" (snapshot {report.snapshot[:12]})" if report.snapshot else ""
    if report.action == "absent":
        say(f"{name}: no worktree")
    elif report.action == "would_remove":
        say(f"{name}: would snapshot {_held(report)}, then remove {where}")
        say(f"{name}: branch {report.branch} stays")
    elif report.action == "removed":
        freed = human_bytes(report.freed_bytes)
        say(f"{name}: snapshot {(report.snapshot or '?')[:12]} holds {_held(report)}")
        say(f"{name}: removed {where}, freed {freed}; branch {report.branch} stays")
    else:
        verb = "kept" if report.action == "kept" else "refused"
        say(f"{name}: {verb} {where}: {report.reason}{snap}")
        for path in report.uncommitted[:SHOWN]:
            say(f"  uncommitted, in no snapshot: {path}")
        for commit in report.unsaved_commits[:SHOWN]:
            say(f"  commit on no other branch or remote: {commit[:12]}")
        more = len(report.uncommitted) + len(report.unsaved_commits) - 2 * SHOWN
        if len(report.uncommitted) > SHOWN or len(report.unsaved_commits) > SHOWN:
            say(f"  … and more ({max(more, 0)}+); --json lists them all")
