"""Recording a prepared snapshot: ``commit-tree``, then ``update-ref`` from the old value to the
new one (compare-and-swap), so two concurrent saves never lose each other's snapshot.

Only one cairn process at a time moves a ticket's ref: each holds an ``flock`` on
``<git-common-dir>/cairn/locks/ref-<ticket>`` around its ``update-ref``. While it does, a
``<ref>.lock`` beside the ref can only be the left-over of a git killed half-way through an
update (the kernel drops the flock of a killed holder, git's lock file stays); it is removed,
with a warning, instead of failing every later snapshot of the ticket.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator

from cairn.errors import CairnError, SaveTimeout
from cairn.git import Deadline, Git, Repo, null_oid
from cairn.util import durable
from cairn.wip.hashcache import HashCache
from cairn.wip.meta import SnapshotMeta
from cairn.wip.models import SaveResult, Skipped
from cairn.wip.objects import CommitObject, read_commits


class Prepared:
    """The trees of a snapshot, written to the object store but not yet recorded by a ref."""

    def __init__(
        self,
        *,
        repo: Repo,
        git: Git,
        ticket: str,
        ref: str,
        head: str | None,
        head_tree: str | None,
        branch: str | None,
        index_tree: str | None,
        staged: bool,
        tree: str,
        files_changed: int,
        clean: bool,
        skipped: list[Skipped],
        conflicted: list[str],
        prev: CommitObject | None,
        prev_meta: SnapshotMeta | None,
        cache: HashCache | None = None,
    ) -> None:
        self.repo, self.git, self.ticket, self.ref = repo, git, ticket, ref
        self.head, self.head_tree, self.branch = head, head_tree, branch
        self.index_tree, self.staged, self.tree = index_tree, staged, tree
        self.files_changed, self.clean = files_changed, clean
        self.skipped, self.conflicted = skipped, conflicted
        self.prev, self.prev_meta, self.cache = prev, prev_meta, cache

    def same_as_prev(self) -> bool:
        return (
            self.prev is not None
            and self.prev_meta is not None
            and self.prev.tree == self.tree
            and self.prev_meta.base == self.head
            and self.prev_meta.index_tree == self.index_tree
        )


def record(
    prepared: Prepared,
    reason: str,
    run_id: str | None,
    deadline: Deadline | None,
    *,
    mirror_branch: bool = False,
    force: bool = False,
) -> SaveResult:
    """Commit the prepared trees and move the ref by compare-and-swap (retrying on races).

    Without ``force`` nothing is recorded when the tree matches the last snapshot, or when it
    is clean and there is no snapshot yet. ``force`` still reuses an identical last snapshot.
    """
    p = prepared
    git = p.git
    index_commit: str | None = None
    warnings: list[str] = []
    while True:
        if p.same_as_prev() or (p.clean and p.prev is None and not force):
            if os.path.lexists(p.repo.common_dir / f"{p.ref}.lock"):
                with _ref_writer(p, deadline) as cleared:
                    warnings += cleared
            prev = p.prev.oid if p.prev else None
            return _result(p, reason, prev, created=False, warnings=warnings)
        index_commit = index_commit or _index_commit(p, deadline)
        meta = SnapshotMeta(
            ticket=p.ticket,
            reason=reason,
            base=p.head,
            branch=p.branch,
            index_tree=p.index_tree,
            files_changed=p.files_changed,
            seq=(p.prev_meta.seq + 1) if p.prev_meta else 1,
            run=run_id,
            skipped=p.skipped,
            conflicted=p.conflicted,
        )
        parents = [c for c in (p.prev.oid if p.prev else None, p.head, index_commit) if c]
        args = ["commit-tree", "--no-gpg-sign"]
        for parent in parents:
            args += ["-p", parent]
        commit = git.out(
            [*args, p.tree, "-F", "-"], input=meta.render().encode(), deadline=deadline
        )
        if deadline is not None and deadline.expired():
            raise SaveTimeout("time budget spent before the ref update")
        old = p.prev.oid if p.prev else null_oid(commit)
        with _ref_writer(p, deadline) as cleared:
            warnings += cleared
            moved = git.run(
                ["update-ref", "--create-reflog", "-m", f"cairn wip: {reason}", p.ref, commit, old],
                check=False,
                deadline=deadline,
                critical=True,
            )
        if moved.ok:
            break
        (current,) = read_commits(git, [p.ref], deadline)
        if (current.oid if current else None) == (p.prev.oid if p.prev else None):
            if "lock" not in moved.error_text:
                raise CairnError(f"cannot update {p.ref}: {moved.error_line}")
            import random

            time.sleep(random.uniform(0.005, 0.05))  # another writer holds the ref lock
        p.prev = current
        p.prev_meta = SnapshotMeta.parse(current.message) if current else None
    if mirror_branch:
        warnings += _mirror_branch(p, commit, reason, deadline)
    return _result(p, reason, commit, created=True, warnings=warnings)


@contextlib.contextmanager
def _ref_writer(p: Prepared, deadline: Deadline | None) -> Iterator[list[str]]:
    """Hold the ticket's ref-writer lock, clearing a git lock left by a killed update; yields
    the warnings to report."""
    locks = p.repo.common_dir / "cairn" / "locks"
    durable.ensure_dir(locks)
    fd = durable.open_state(locks / f"ref-{p.ticket}", os.O_RDWR | os.O_CREAT, "ref lock")
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and deadline.expired():
                    raise SaveTimeout(f"time budget spent waiting to update {p.ref}") from None
                time.sleep(0.002)
        warnings = []
        left_over = p.repo.common_dir / f"{p.ref}.lock"
        try:
            left_over.unlink()
            warnings.append(f"removed {p.ref}.lock, left by a git killed while updating {p.ref}")
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.EISDIR):
                raise
        yield warnings
    finally:
        os.close(fd)


def _index_commit(p: Prepared, deadline: Deadline | None) -> str | None:
    """A commit of the staged state, kept as a parent so it stays reachable; None if nothing is
    staged beyond HEAD."""
    if p.index_tree is None or not p.staged or p.index_tree == p.head_tree:
        return None
    args = ["commit-tree", "--no-gpg-sign", p.index_tree, "-m", f"cairn index of {p.ticket}"]
    if p.head:
        args += ["-p", p.head]
    return p.git.out(args, deadline=deadline)


def _mirror_branch(p: Prepared, commit: str, reason: str, deadline: Deadline | None) -> list[str]:
    branch = f"cairn/wip/{p.ticket}"
    if p.branch == branch:
        return [f"branch {branch} is checked out here; it was not moved"]
    moved = p.git.run(
        ["update-ref", "-m", f"cairn wip: {reason}", f"refs/heads/{branch}", commit],
        check=False,
        deadline=deadline,
        critical=True,
    )
    return [] if moved.ok else [f"branch {branch} not updated: {moved.error_line}"]


def _result(
    p: Prepared,
    reason: str,
    commit: str | None,
    *,
    created: bool,
    warnings: list[str] | None = None,
) -> SaveResult:
    return SaveResult(
        ref=p.ref,
        commit=commit,
        created=created,
        base=p.head,
        branch=p.branch,
        files_changed=p.files_changed,
        skipped=p.skipped,
        elapsed_ms=0,
        ticket=p.ticket,
        reason=reason,
        conflicted=p.conflicted,
        previous=p.prev.oid if p.prev and created else None,
        warnings=warnings or [],
    )
