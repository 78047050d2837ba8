"""What the fleet tells people about a ticket, read from its files: the latest run's change
summary and its status line, the run's usage, the snapshot ref and the branch, pushed.

``push_branch`` pushes ``cairn/<ticket>`` to ``fleet.remote`` (through ``cairn.git``), for a
completed ticket when ``fleet.push`` is on.
"""

from __future__ import annotations

import os
import re
from typing import Any, NamedTuple

from cairn.config.records import Config
from cairn.errors import CairnError
from cairn.git import Repo
from cairn.git.process import Deadline
from cairn.remote.refs import PushFailed
from cairn.state import status
from cairn.state.layout import ARTIFACT, SUMMARY_ARTIFACT, SUMMARY_ROLE, Layout
from cairn.util import clock
from cairn.util.durations import parse_duration

_STATUS = re.compile(r"^## Status[ \t]*\r?\n(?:[ \t]*\r?\n)*([^\r\n]+)", re.MULTILINE)
_SUFFIX = f"_{SUMMARY_ROLE}_{SUMMARY_ARTIFACT}.md"
SUMMARY_LIMIT = 60_000  # GitHub refuses bodies over 65,536 characters
PUSH_SECONDS = 300


class Facts(NamedTuple):
    ticket: str
    branch: str
    run: str | None
    summary: str | None  # the change summary's markdown, without its front matter
    status_line: str | None  # "Completed — 2 of 2 tasks", "Interrupted — stall …"
    usage: dict[str, Any] | None  # tokens and cost, as the summary's front matter has them
    snapshot_ref: str
    snapshot: str | None  # the snapshot ref's commit, if there is one


def facts(repo: Repo, config: Config, layout: Layout, ticket: str) -> Facts:
    ticket_dir = str(layout.ticket_dir(ticket))
    stale_after = parse_duration(config.marker.stale_after)
    row, _ = status.ticket_row(ticket_dir, ticket, stale_after, clock.now())
    run = row.run if row is not None else None
    text = _summary_text(os.path.join(ticket_dir, run)) if run else None
    match = _STATUS.search(text) if text else None
    ref = f"{config.snapshot.ref_prefix.rstrip('/')}/{ticket}"
    found = repo.git.run(["rev-parse", "--verify", "-q", f"{ref}^{{commit}}"], check=False)
    return Facts(
        ticket=ticket,
        branch=f"cairn/{ticket}",
        run=run,
        summary=_without_front_matter(text)[:SUMMARY_LIMIT] if text else None,
        status_line=match.group(1).strip() if match else None,
        usage=row.usage if row is not None else None,
        snapshot_ref=ref,
        snapshot=found.text.strip() or None if found.ok else None,
    )


def push_branch(repo: Repo, config: Config, ticket: str) -> str:
    """Push ``cairn/<ticket>`` to ``fleet.remote``; the branch. PushFailed says why not."""
    branch = f"cairn/{ticket}"
    remote = config.fleet.remote
    try:
        result = repo.git.run(
            ["push", "--quiet", remote, f"refs/heads/{branch}:refs/heads/{branch}"],
            check=False,
            deadline=Deadline(PUSH_SECONDS),
        )
    except CairnError as exc:  # git missing, or the push ran out of time
        raise PushFailed(f"git push {remote} {branch} failed: {exc}") from None
    if not result.ok:
        raise PushFailed(f"git push {remote} {branch} failed: {result.error_line}")
    return branch


def _summary_text(run_dir: str) -> str | None:
    try:
        names = [n for n in os.listdir(run_dir) if n.endswith(_SUFFIX) and ARTIFACT.fullmatch(n)]
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not names:
        return None
    latest = max(names, key=lambda n: int(n.split("_", 1)[0]))
    try:
        with open(os.path.join(run_dir, latest), encoding="utf-8", errors="replace") as handle:
            return handle.read(4 * SUMMARY_LIMIT)
    except OSError:
        return None


def _without_front_matter(text: str) -> str:
    if text.startswith("---\n"):
        end = text.find("\n---\n", 3)
        if end > 0:
            return text[end + 5 :].lstrip("\n")
    return text
