"""A worker's root stays bounded: one live worker per root (an flock held for the worker's
life), what a finished segment leaves is removed once its push is confirmed, the clone is
garbage-collected between rebuilds, and a worker at start sweeps what a dead predecessor left
(its runs and agents on this host, worktrees, branches, plans, pid files, logs).

What stays: the clone (``repo-<hash>``, one per remote) and, while segments run, one worktree
per running segment (``<root>/<ticket>``) — at most ``concurrency`` of them, plus one an
abandoned attempt may still be removing."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path
from typing import IO

from cairn.errors import BadInput
from cairn.git import base_runner
from cairn.scale import shared, workspace
from cairn.scale.messages import TicketInput

OWNER = ".worker.lock"  # flocked by the live worker of the root; holds its pid
# the root's per-ticket leftovers, beside the clones and worktrees
TICKET_DIRS = (".plans", ".pids", ".logs", ".checkpoint-requests")
# git's own default threshold (a clone's own gc.auto wins): cairn turns auto-gc off for every git
# it runs (cairn.git), and turns it on again for the worker's clone after segments
GC_AUTO = 6700


def claim(root: Path) -> IO[str]:
    """Hold ``root`` for this worker's life (keep the handle open); BadInput, with nothing
    touched, when a live worker holds it."""
    handle = (root / OWNER).open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        pid = handle.read().strip() or "unknown"
        handle.close()
        raise BadInput(
            f"workspace root {root} is used by a live worker (pid {pid}); stop it or give "
            "another --workspace-root"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def clones(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("repo-*") if (p / ".git").is_dir())


def finish(root: Path, task: TicketInput) -> None:
    """Remove what the ticket's segment left in the root (its push is on the remote, or the
    attempt is over: a retry always rebuilds from the remote)."""
    clone = workspace.clone_dir(root, task.remote)
    with shared.ticket_locked(f"{root}:{task.ticket}"):
        if (clone / ".git").is_dir():
            with shared.locked(root / workspace.CLONE_LOCK, exclusive=False):  # never beside gc
                _forget(root, clone, task.ticket)


def _forget(root: Path, clone: Path, ticket: str) -> None:
    git = base_runner(clone)
    worktree = root / ticket
    if (worktree / ".git").is_dir():
        return  # a clone, never a ticket's worktree (those have a .git file)
    git.run(["worktree", "unlock", str(worktree)], check=False)  # a half-made one is locked
    git.run(["worktree", "remove", "--force", str(worktree)], check=False)
    shutil.rmtree(worktree, ignore_errors=True)
    refs = [  # the ticket's branch, snapshot (and restore's), state and base refs
        ref
        for ref in git.out(["for-each-ref", "--format=%(refname)"]).split()
        if ref.rpartition("/")[2] in (ticket, f"{ticket}.restore")
        and not ref.startswith(("refs/remotes/", "refs/tags/"))
        and (ref.startswith("refs/heads/cairn/") or not ref.startswith("refs/heads/"))
    ]
    if refs:
        delete = "".join(f"delete {ref}\n" for ref in refs).encode()
        git.run(["update-ref", "--stdin"], input=delete, check=False)
    shutil.rmtree(clone / ".git" / "cairn" / "tickets" / ticket, ignore_errors=True)
    shutil.rmtree(root / ".plans" / ticket, ignore_errors=True)
    shutil.rmtree(root / ".checkpoint-requests" / ticket, ignore_errors=True)
    for path in (root / ".pids" / f"{ticket}.json", root / ".logs" / f"{ticket}.log"):
        path.unlink(missing_ok=True)


def sweep(root: Path) -> int:
    """What a dead worker left in ``root`` (the caller holds the root): its runs and agents
    still alive on this host are stopped, every ticket's worktree, refs, state and files are
    removed. How many tickets were swept."""
    tickets: set[str] = set()
    for pid_file in sorted((root / ".pids").glob("*.json")):
        workspace.stop_recorded(pid_file)
        tickets.add(pid_file.stem)
    for clone in clones(root):
        states = clone / ".git" / "cairn" / "tickets"
        for state_dir in sorted(states.glob("*")) if states.is_dir() else []:
            workspace.stop_marked(state_dir)
            tickets.add(state_dir.name)
        git = base_runner(clone)
        listing = git.out(["worktree", "list", "--porcelain"]).splitlines()
        for line in [line for line in listing if line.startswith("worktree ")][1:]:  # not its own
            path = Path(line.removeprefix("worktree "))
            if path.parent.resolve() == root.resolve():
                tickets.add(path.name)
        listed = git.out(["for-each-ref", "--format=%(refname)", "refs/heads/cairn/"])
        tickets.update(ref.removeprefix("refs/heads/cairn/") for ref in listed.split())
    for folder in TICKET_DIRS:
        for entry in (root / folder).glob("*") if (root / folder).is_dir() else []:
            tickets.add(entry.name.removesuffix(".json").removesuffix(".log"))
    for ticket in sorted(tickets):
        for clone in clones(root):
            _forget(root, clone, ticket)
    for clone in clones(root):
        base_runner(clone).run(["worktree", "prune"], check=False)
    return len(tickets)


def collect(root: Path) -> bool:
    """``git gc --auto`` in each clone of ``root``, only while no rebuild holds it (False: it
    was busy, try after the next segment)."""
    with shared.locked_if_free(root / workspace.CLONE_LOCK) as free:
        if not free:
            return False
        for clone in clones(root):
            own = base_runner(clone).run(
                ["config", "--file", str(clone / ".git" / "config"), "--get", "gc.auto"],
                check=False,
            )
            git = base_runner(clone).with_config(
                f"gc.auto={own.text or GC_AUTO}",  # the clone's own setting, else git's default
                "gc.autoDetach=false",  # in this thread, under the lock: never beside a rebuild
                "gc.pruneExpire=1.hour.ago",
                "gc.worktreePruneExpire=now",
            )
            with contextlib.suppress(Exception):  # gc is housekeeping: never fails a segment
                git.run(["gc", "--auto", "--quiet"])
        return True
