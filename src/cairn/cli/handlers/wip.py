"""``cairn wip save``: snapshot the work tree now."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from pathlib import Path

    from cairn.wip.models import Skipped

SKIP_REASONS = {
    "too_large": "over the size cap",
    "nested_repo": "nested repository",
    "over_budget": "over the snapshot budget",
    "special_file": "not a regular file",
}


def skipped_line(item: Skipped) -> str:
    from cairn.cli.output import human_bytes

    extra = []
    if item.files is not None:
        extra.append(f"{item.files} files")
    if item.bytes is not None:
        extra.append(human_bytes(item.bytes))
    what = SKIP_REASONS[item.reason]
    return f"  skipped {item.path} ({what}{', ' + ', '.join(extra) if extra else ''})"


def save(
    ticket: str | None = None,
    reason: str = "manual",
    run: str | None = None,
    timeout_ms: int | None = None,
    json: bool = False,
    workspace: Path | str = ".",
) -> None:
    if not json and said_unchanged(workspace, ticket, run, timeout_ms):
        return
    from cairn.cli.output import console, emit_json
    from cairn.wip.saving import save as save_snapshot

    timeout = timeout_ms / 1000 if timeout_ms is not None else None
    result = save_snapshot(workspace, ticket=ticket, reason=reason, timeout=timeout, run_id=run)
    if json:
        emit_json(result)
        return
    console.print(result.summary)
    if result.created:
        base = result.base[:12] if result.base else "no commit yet"
        console.print(
            f"  base {base} on {result.branch or 'detached HEAD'} · {result.elapsed_ms} ms"
        )
    if result.conflicted:
        console.print(f"  conflicted (saved with their markers): {', '.join(result.conflicted)}")
    for item in result.skipped:
        console.print(skipped_line(item))
    for warning in result.warnings:
        console.print(f"  warning: {warning}")


def said_unchanged(
    workspace: Path | str, ticket: str | None, run: str | None, timeout_ms: int | None
) -> bool:
    """Print the no-op line when the work tree's proof holds (``cairn.wip.proof``), read from
    the status pass and discovery started early, before the snapshot engine is imported. When
    it does not, print nothing and hand both back: the save takes them as they are."""
    from time import monotonic

    from cairn.git import status as early
    from cairn.git.discovery import parse
    from cairn.wip import proof

    where = os.fspath(workspace)
    early.start_early(where)  # unless the command line did
    status, discovery = early.start_status(where), early.take_discovery(where)
    try:
        if status is None or discovery is None:
            return False
        paths = discovery.result(check=False)
        found = parse(paths.returncode, paths.stdout)
        kept = proof.read(found, ticket, run) if found else None
        if found is None or kept is None:
            return False
        limit = timeout_ms if timeout_ms is not None else kept.timeout_ms
        if not status.wait(monotonic() + limit / 1000):
            return False  # the save's own deadline decides
        done = status.result(check=False)
        if not done.ok or proof.holds(found, done.stdout, ticket, run, kept) is None:
            return False
    finally:
        early.hand_back(where, status, discovery)
    sys.stdout.write(proof.unchanged_line(kept.ref, kept.commit) + "\n")
    return True
