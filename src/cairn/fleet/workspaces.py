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
from cairn.config.records import Config
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
def worktrees_locked(repo: Repo) -> Iterator[int]:
    """One worktree change at a time in this repository (ensure, prune); yields the lock's
    descriptor, which ``git worktree add`` is given (a git outliving a killed supervisor holds
    the lock until the worktree is whole)."""
    lock = repo.common_dir / "cairn" / "locks" / "worktrees"
    durable.ensure_dir(lock.parent)
    with durable.locked(lock) as fd:
        yield fd


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
    the branch when it exists), reused when it is there, rebuilt when its record is stale or
    it is not a complete checkout (``_mend``)."""
    tickets.validate(ticket)
    with worktrees_locked(repo) as hold:
        return _ensure(repo, config, ticket, hold)


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


def _ensure(repo: Repo, config: Config, ticket: str, hold: int) -> Workspace:
    root = workspace_root(repo, config)
    path, branch = root / ticket, branch_of(ticket)
    entries = gitworktree.listing(repo)
    main = entries[0]
    if main.branch == branch:
        raise BadInput(
            f"branch {branch} is checked out in the main work tree {main.path}; switch that "
            "work tree to another branch so the ticket can have its own worktree"
        )
    warnings = _mend(repo, _mine(entries, path, branch), branch)
    mine = (
        _mine(gitworktree.listing(repo), path, branch) if warnings else _mine(entries, path, branch)
    )
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
        warnings += _clear_stale_locks(repo, branch, gitworktree.admin_dir(repo, entry.path))
        restored, notes = _finish_restore(repo, entry, config, ticket)
        return Workspace(entry.path, branch, False, False, restored, (*warnings, *notes))
    warnings += _clear_the_way(path)
    warnings += _clear_stale_locks(repo, branch, None)
    tip = gitworktree.branch_tip(repo, branch)
    repaired = bool(stale) or bool(warnings)
    if tip is None:
        start = _start_point(repo, config, main.head)
        root.mkdir(parents=True, exist_ok=True)
        gitworktree.add(repo, path, branch, base=start, hold=hold)
        return Workspace(path, branch, True, repaired, None, tuple(warnings))
    snapshot, notes = _to_restore(repo, config, ticket, tip)
    if snapshot is not None:  # said before the worktree exists: a kill in between redoes it
        durable.ensure_dir(_restores(repo))
        durable.atomic_write(_restores(repo) / ticket, f"{snapshot}\n")
    root.mkdir(parents=True, exist_ok=True)
    gitworktree.add(repo, path, branch, base=None, hold=hold)
    if snapshot is not None:
        notes += _restore(repo, path, config, ticket, snapshot)
    return Workspace(path, branch, True, repaired, snapshot, tuple(warnings + notes))


def _mine(entries: list[Worktree], path: Path, branch: str) -> list[Worktree]:
    return [e for e in entries[1:] if same_path(e.path, path) or e.branch == branch]


def _mend(repo: Repo, mine: list[Worktree], branch: str) -> list[str]:
    """Worktrees of the ticket that are there but not a complete checkout of ``branch``: a lost
    or broken ``.git`` file is written again (``git worktree repair``), which keeps every file;
    anything else (``git worktree add`` killed half-way, no HEAD, never checked out) is moved
    aside whole, never deleted, and its record unlocked, for the worktree to be made again."""
    said: list[str] = []
    for entry in mine:
        if not entry.path.is_dir():
            continue
        why = gitworktree.damage(repo, entry)
        if why is None:
            continue
        if why == gitworktree.BROKEN_GIT_FILE and entry.locked is None:
            gitworktree.repair(repo, entry.path)
            if gitworktree.damage(repo, _again(repo, entry)) is None:
                said.append(
                    f"the .git file of its worktree {entry.path} was missing or not git's; "
                    "wrote it again (git worktree repair), every file kept"
                )
                continue
        if entry.locked not in (None, gitworktree.INITIALIZING):
            raise BadInput(
                f"the worktree {entry.path} is not a complete checkout of {branch} ({why}) and "
                f"is locked ({entry.locked or 'no reason given'}); run `git worktree unlock "
                f"{entry.path}` and start again"
            )
        if entry.locked is not None:
            gitworktree.unlock(repo, entry.path)
        aside = _aside(entry.path)
        os.rename(entry.path, aside)
        said.append(
            f"the worktree {entry.path} was not a complete checkout of {branch} ({why}); "
            f"moved it to {aside} and made it again from the branch and its latest snapshot"
        )
    return said


def _again(repo: Repo, entry: Worktree) -> Worktree:
    for found in gitworktree.listing(repo)[1:]:
        if same_path(found.path, entry.path):
            return found
    return entry


def _clear_stale_locks(repo: Repo, branch: str, admin: Path | None) -> list[str]:
    """Remove the lock files a killed git left on the branch or in the worktree (no process
    has them open; the ticket has no run now): they hold no work, and would fail every git."""
    said = []
    for lock in gitworktree.stale_locks(repo, branch, admin):
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
            said.append(f"removed {lock}, left by a git killed while it worked")
    return said


def _aside(path: Path) -> Path:
    """A free name beside ``path`` for what was there: ``<name>.orphan-<time>[-n]``."""
    stem = f"{path.name}.orphan-{time.strftime('%Y%m%d-%H%M%S')}"
    aside, n = path.with_name(stem), 1
    while os.path.lexists(aside):
        n += 1
        aside = path.with_name(f"{stem}-{n}")
    return aside


def _clear_the_way(path: Path) -> list[str]:
    """A directory left where the worktree goes (no record points at it: its ``.git`` file was
    lost) is moved aside, never deleted."""
    if not os.path.lexists(path) or (path.is_dir() and not any(path.iterdir())):
        return []
    aside = _aside(path)
    os.rename(path, aside)
    return [f"{path} was not a worktree of this repository; moved it to {aside}"]


def _restores(repo: Repo) -> Path:
    """Where a rebuild notes the snapshot it is about to restore, until it has."""
    return repo.common_dir / "cairn" / "worktree-restores"


def _to_restore(repo: Repo, config: Config, ticket: str, tip: str) -> tuple[str | None, list[str]]:
    """The snapshot to restore into the ticket's rebuilt worktree (at the branch tip): its
    latest, when it was taken on that tip; an older snapshot would undo later commits, so it
    is left in its ref and named in a warning."""
    from cairn import wip

    chain = wip.list_snapshots(repo.toplevel, ticket, limit=2, config=config)
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
    return latest.commit, []


def _restore(repo: Repo, path: Path, config: Config, ticket: str, commit: str) -> list[str]:
    """Bring ``commit`` back into the worktree, snapshot the result, and only then forget
    that a restore was due."""
    from cairn import wip

    result = wip.restore(path, commit, ticket=ticket, config=config)
    wip.save(path, ticket=ticket, reason=f"worktree rebuilt from {commit[:12]}", config=config)
    durable.remove(_restores(repo) / ticket)
    return list(result.warnings)


def _finish_restore(
    repo: Repo, entry: Worktree, config: Config, ticket: str
) -> tuple[str | None, list[str]]:
    """A rebuild killed before its snapshot was all back: restore it again (the worktree is
    still at the commit the snapshot was taken on; otherwise the snapshot stays in its ref)."""
    from cairn import wip

    due = _restores(repo) / ticket
    try:
        commit = due.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None, []
    snap = next(
        (
            s
            for s in wip.list_snapshots(repo.toplevel, ticket, limit=None, config=config)
            if s.commit == commit
        ),
        None,
    )
    if snap is None or snap.base != entry.head:
        durable.remove(due)
        return None, []
    notes = _restore(repo, entry.path, config, ticket, commit)
    return commit, [
        f"the rebuild of {entry.path} was cut short; restored {commit[:12]} again",
        *notes,
    ]
