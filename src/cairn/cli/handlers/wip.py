"""``cairn wip save``: snapshot the work tree now."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from pathlib import Path

    from cairn.git.status import Early
    from cairn.wip.models import Skipped

SKIP_REASONS = {
    "too_large": "over the size cap",
    "nested_repo": "nested repository",
    "over_budget": "over the snapshot budget",
    "special_file": "not a regular file",
}


def skipped_line(item: Skipped) -> str:
    from cairn.util.text import counted, human_bytes

    extra = []
    if item.files is not None:
        extra.append(counted(item.files, "file"))
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
    early: Early | None = None,
) -> None:
    """``early``: the work tree's ``git status`` and discovery, started by the command line
    before it imported this (``cairn.git.status.start_early``); the save owns them."""
    from cairn.cli.output import emit_json, say
    from cairn.wip import proof
    from cairn.wip.saving import save as save_result
    from cairn.wip.saving import save_or_proof

    timeout = timeout_ms / 1000 if timeout_ms is not None else None
    if json:  # the whole result, a no-op's too
        emit_json(
            save_result(
                workspace, ticket=ticket, reason=reason, timeout=timeout, run_id=run, early=early
            )
        )
        return
    result = save_or_proof(
        workspace, ticket=ticket, reason=reason, timeout=timeout, run_id=run, early=early
    )
    if isinstance(result, proof.Proof):  # nothing to record: its one line
        say(proof.unchanged_line(result.ref, result.commit))
        return
    say(result.summary)
    if result.created:
        base = result.base[:12] if result.base else "no commit yet"
        say(f"  base {base} on {result.branch or 'detached HEAD'} · {result.elapsed_ms} ms")
    if result.conflicted:
        say(f"  conflicted (saved with their markers): {', '.join(result.conflicted)}")
    for item in result.skipped:
        say(skipped_line(item))
    for warning in result.warnings:
        say(f"  warning: {warning}")
