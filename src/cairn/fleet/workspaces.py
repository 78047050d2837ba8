"""Ticket worktrees: where each ticket's agent works, created, reused or rebuilt.

A ticket ``T`` works in ``<workspace_root>/T`` on branch ``cairn/T``. The root defaults to a
sibling of the main work tree (``<repo>.cairn/``) and is never inside it, so ``git status`` of the
main work tree never shows a ticket's files. A stale worktree record (the directory is gone, or
git says prunable) never blocks a ticket: the record is pruned and the worktree rebuilt from the
branch plus the ticket's latest snapshot.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from cairn import tickets
from cairn.config import Config
from cairn.errors import BadInput
from cairn.fleet import gitworktree
from cairn.fleet.gitworktree import Worktree, branch_of, same_path
from cairn.fleet.hooks import HookResult, run_hook
from cairn.git import Repo
from cairn.util import durable

__all__ = ["HookResult", "Workspace", "ensure", "find", "run_hook", "workspace_root"]


class Workspace(NamedTuple):
    path: Path
    branch: str
    created: bool  # made now by `git worktree add` (a new or a rebuilt worktree)
    repaired: bool  # a stale record was pruned and the worktree rebuilt
    restored: str | None = None  # the snapshot commit brought back into a rebuilt worktree
    warnings: tuple[str, ...] = ()


def workspace_root(repo: Repo, config: Config) -> Path:
    """``fleet.workspace_root`` (relative to the main work tree), or ``<main>.cairn`` beside it.
    Refused inside the main work tree or the git directory."""
    main = gitworktree.main_toplevel(repo)
    given = config.fleet.workspace_root
    if given is None:
        return main.parent / f"{main.name.removesuffix('.git')}.cairn"
    root = Path(os.path.normpath(main / Path(given).expanduser()))
    real = Path(os.path.realpath(root))
    for inside, what in ((main, "the main work tree"), (repo.common_dir, "the git directory")):
        mine = Path(os.path.realpath(inside))
        if real == mine or mine in real.parents:
            raise BadInput(
                f"fleet.workspace_root {root} is inside {what} {inside}; worktrees there would "
                f"show in `git status`: use a directory outside it, e.g. ../{main.name}.cairn"
            )
    return root


@contextlib.contextmanager
def worktrees_locked(repo: Repo) -> Iterator[None]:
    """One worktree change at a time in this repository (ensure, prune)."""
    lock = repo.common_dir / "cairn" / "locks" / "worktrees"
    durable.ensure_dir(lock.parent)
    with durable.locked(lock):
        yield


def find(repo: Repo, config: Config, ticket: str) -> Worktree | None:
    """The live worktree of ``ticket``: at its path, or wherever its branch is checked out."""
    path = workspace_root(repo, config) / ticket
    branch = branch_of(ticket)
    for entry in gitworktree.listing(repo)[1:]:
        if not entry.gone() and (same_path(entry.path, path) or entry.branch == branch):
            return entry
    return None


def ensure(repo: Repo, config: Config, ticket: str) -> Workspace:
    """The worktree of ``ticket``, made now if needed (from the main work tree's HEAD, or from
    the branch when it exists), reused when it is there, rebuilt when its record is stale."""
    tickets.validate(ticket)
    with worktrees_locked(repo):
        return _ensure(repo, config, ticket)


def _start_point(repo: Repo, config: Config, head: str | None) -> str:
    """Where a new ticket branch starts: ``[fleet] base`` when set, else the main work tree's
    HEAD."""
    base = config.fleet.base
    if base is None:
        if not head:
            raise BadInput(
                f"{repo.toplevel} has no commit yet; commit once before starting the fleet"
            )
        return head
    found = repo.git.run(
        ["rev-parse", "--verify", "-q", f"refs/heads/{base}^{{commit}}"], check=False
    )
    if not found.text:
        raise BadInput(
            f"[fleet] base {base!r} is not a branch of {repo.toplevel}; create it or fix "
            "[fleet] base in cairn.toml"
        )
    return found.text


def _ensure(repo: Repo, config: Config, ticket: str) -> Workspace:
    root = workspace_root(repo, config)
    path, branch = root / ticket, branch_of(ticket)
    entries = gitworktree.listing(repo)
    main = entries[0]
    if main.branch == branch:
        raise BadInput(
            f"branch {branch} is checked out in the main work tree {main.path}; switch that "
            "work tree to another branch so the ticket can have its own worktree"
        )
    mine = [e for e in entries[1:] if same_path(e.path, path) or e.branch == branch]
    stale = [e for e in mine if e.gone()]
    for entry in stale:
        if entry.locked is not None:
            raise BadInput(
                f"the worktree record of {entry.path} is stale but locked; run "
                f"`git worktree unlock {entry.path}` and start again"
            )
    if stale:
        gitworktree.prune_records(repo)
    for entry in mine:
        if entry in stale:
            continue
        if entry.branch not in (branch, None):
            raise BadInput(
                f"the worktree {entry.path} of ticket {ticket} has {entry.branch} checked out, "
                f"not {branch}; check out {branch} there again, or remove that worktree"
            )
        return Workspace(entry.path, branch, created=False, repaired=False)
    warnings = _clear_the_way(path)
    tip = gitworktree.branch_tip(repo, branch)
    if tip is None:
        start = _start_point(repo, config, main.head)
        root.mkdir(parents=True, exist_ok=True)
        gitworktree.add(repo, path, branch, base=start)
        return Workspace(path, branch, True, bool(stale), None, tuple(warnings))
    root.mkdir(parents=True, exist_ok=True)
    gitworktree.add(repo, path, branch, base=None)
    restored, notes = _bring_back(path, config, ticket, tip)
    return Workspace(path, branch, True, bool(stale), restored, tuple(warnings + notes))


def _clear_the_way(path: Path) -> list[str]:
    """A directory left where the worktree goes (no record points at it: its ``.git`` file was
    lost) is moved aside, never deleted."""
    if not os.path.lexists(path) or (path.is_dir() and not any(path.iterdir())):
        return []
    aside = path.with_name(f"{path.name}.orphan-{time.strftime('%Y%m%d-%H%M%S')}")
    os.rename(path, aside)
    return [f"{path} was not a worktree of this repository; moved it to {aside}"]


def _bring_back(path: Path, config: Config, ticket: str, tip: str) -> tuple[str | None, list[str]]:
    """Restore the ticket's latest snapshot into its rebuilt worktree (at the branch tip) when
    the snapshot was taken on that tip; an older snapshot would undo later commits, so it is
    left in its ref and named in a warning."""
    from cairn import wip

    chain = wip.list_snapshots(path, ticket, limit=2, config=config)
    if not chain:
        return None, []
    latest = chain[0]
    # A restore's safety snapshot of a clean tree (a rebuild killed half-way) holds nothing.
    if latest.reason.startswith("before restore of ") and latest.files_changed == 0:
        if len(chain) < 2:
            return None, []
        latest = chain[1]
    if latest.base != tip:
        return None, [
            f"snapshot {latest.commit[:12]} of {ticket} was taken on "
            f"{(latest.base or 'no commit')[:12]}, not on the branch tip {tip[:12]}; "
            f"not restored (see `cairn wip show {latest.commit[:12]}`)"
        ]
    if latest.files_changed == 0:
        return None, []
    result = wip.restore(path, latest.commit, ticket=ticket, config=config)
    wip.save(
        path, ticket=ticket, reason=f"worktree rebuilt from {latest.commit[:12]}", config=config
    )
    return latest.commit, list(result.warnings)
