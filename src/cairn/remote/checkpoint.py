"""The checkpoint: snapshot the worktree, commit the run state, and push the ticket's branch,
snapshot ref and state ref to the shared remote in one atomic push fenced by leases — and the
restore of a pushed snapshot after a rebuild. One implementation for a worker of the fleet on
Temporal (``cairn.scale.workspace``) and a run with ``--remote`` (``cairn.remote.portable``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cairn.git import Git
from cairn.remote import refs as remote_refs
from cairn.remote import statecommit

log = logging.getLogger(__name__)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from cairn.git.process import Deadline


class Side(Protocol):
    """One process's hold on a ticket of the shared remote: where its files are, what the
    remote held when it last looked or pushed (the leases), and its claim (the fencing token)."""

    @property
    def git(self) -> Git: ...  # in the repository whose refs are pushed
    @property
    def remote(self) -> str: ...
    @property
    def ticket(self) -> str: ...
    @property
    def worktree(self) -> Path: ...
    @property
    def refs(self) -> remote_refs.TicketRefs: ...
    @property
    def leases(self) -> dict[str, str | None]: ...
    @property
    def state_dir(self) -> Path: ...
    @property
    def claim(self) -> statecommit.Claim: ...


@dataclass(frozen=True)
class Pushed:
    """The shas a checkpoint left on the remote (None: the remote has no such ref)."""

    branch: str | None
    snapshot: str | None
    state: str | None


def checkpoint(
    side: Side, reason: str, *, save: bool = True, deadline: Deadline | None = None
) -> Pushed:
    """Snapshot the worktree (unless ``save`` is False: the caller saved one), commit the run
    state, push branch, snapshot and state to the remote (fenced by the leases), and say what
    is there. Raises refs.Fenced, refs.PushFailed; a failed snapshot raises too, but for one
    that ran out of time (logged, the next checkpoint catches up)."""
    git, refs = side.git, side.refs
    before = sha_of(git, refs.wip)
    if save:
        snapshot(side, reason)
    updates: dict[str, str] = {}
    wip = sha_of(git, refs.wip)
    if wip:
        updates[refs.wip] = wip
    branch = _branch_with(git, sha_of(git, refs.branch), wip, before)
    if branch:
        updates[refs.branch] = branch
    parent = side.leases.get(refs.state)
    updates[refs.state] = statecommit.commit(git, side.state_dir, parent, side.ticket, side.claim)
    changed = {ref: sha for ref, sha in updates.items() if side.leases.get(ref) != sha}
    if changed:
        # the state ref goes with every push, so its lease fences the whole push: each attempt
        # made its own state commit first (its claim), so an older attempt's lease is stale
        changed.setdefault(refs.state, updates[refs.state])
        remote_refs.push(git, changed, side.leases, side.remote, deadline)
        side.leases.update(changed)
    return Pushed(updates.get(refs.branch), updates.get(refs.wip), updates.get(refs.state))


def snapshot(side: Side, reason: str) -> None:
    """``wip save`` of the worktree. A save that ran out of time (``cutoff_timeout_ms``; the
    expected race: the run's own save held the ticket's ref that long) is skipped with a
    warning in the log; any other failure raises: a checkpoint never hides a snapshot that
    failed."""
    from cairn.errors import SaveTimeout
    from cairn.wip.saving import save

    try:
        save(side.worktree, ticket=side.ticket, reason=reason)
    except SaveTimeout as exc:
        log.warning(
            "cairn: %s: checkpoint (%s) without a new snapshot: %s", side.ticket, reason, exc
        )


def restore_snapshot(git: Git, worktree: Path, branch: str, sha: str, ticket: str) -> bool:
    """cairn's own restore of snapshot ``sha`` into ``worktree``, when it was taken on the tip
    of ``branch`` (an older one would undo later commits: it stays in its ref). True when
    restored."""
    from cairn.wip.meta import SnapshotMeta
    from cairn.wip.restoring import restore

    tip = git.out(["rev-parse", branch]).strip()
    meta = SnapshotMeta.parse(git.out(["log", "-1", "--format=%B", sha]))
    if meta is None or meta.base != tip:
        return False
    restore(worktree, sha, ticket=f"{ticket}.restore")
    return True


def sha_of(git: Git, ref: str) -> str | None:
    return git.run(["rev-parse", "--verify", "-q", ref], check=False).text or None


def _branch_with(git: Git, tip: str | None, wip: str | None, before: str | None) -> str | None:
    """The branch sha to push beside snapshot ``wip``: the snapshot's base when the snapshot is
    new this checkpoint and the agent committed since it was taken (its base, an ancestor of
    ``tip``), so the pair on the remote is one a rebuild restores (``restore_snapshot``); the
    newer commit goes with the next checkpoint. Else the branch's ``tip``."""
    from cairn.wip.meta import SnapshotMeta

    if tip is None or wip is None or wip == before:
        return tip
    meta = SnapshotMeta.parse(git.out(["log", "-1", "--format=%B", wip]))
    base = meta.base if meta is not None else None
    if base is None or base == tip:
        return tip
    if git.run(["merge-base", "--is-ancestor", base, tip], check=False).ok:
        return base
    return tip  # history rewritten since the snapshot: the rebuild skips it, as it should
