"""``prepare``: write a snapshot's trees (the work tree's, the staged state's) and record
nothing: what a save (``cairn.wip.saving``) does once the no-op proof did not answer, and what
a restore and the fleet's prune check before they touch a work tree.

The status pass reads the user's index where it is; the trees are HEAD's tree plus the changed
paths (``cairn.wip.treebuild``), the files hashed only when the stat cache
(``cairn.wip.hashcache``) does not know them.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from cairn import tickets
from cairn.errors import BadInput, GitError
from cairn.wip.hashcache import HashCache, stamp_now
from cairn.wip.hashcache import digest as tree_key
from cairn.wip.meta import SnapshotMeta
from cairn.wip.naming import wip_ref
from cairn.wip.objects import CommitObject, ObjectReader, parse_commit, read_objects
from cairn.wip.recording import Prepared
from cairn.wip.scan import Selection, StatusScan, scan_status, select_untracked
from cairn.wip.treebuild import Edit, Known, TreeWriter, hash_worktree

if TYPE_CHECKING:
    from pathlib import Path

    from cairn.config.records import Config
    from cairn.git import Deadline, Git, Repo
    from cairn.git.process import Started

# A ref whose components all look like this is valid for git (no "..", no leading "." or "-",
# no ".lock" ending), so the usual snapshot ref needs no ``git check-ref-format``.
_PLAIN_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")


def plainly_valid(ref: str) -> bool:
    parts = ref.split("/")
    return (
        len(parts) > 1
        and parts[0] == "refs"
        and all(_PLAIN_COMPONENT.fullmatch(p) and not p.endswith(".lock") for p in parts)
    )


def checked_ref(git: Git, ref: str) -> str:
    if plainly_valid(ref):
        return ref
    if not git.run(["check-ref-format", ref], check=False).ok:
        raise BadInput(f"{ref!r} is not a valid git ref name; choose another ticket id")
    return ref


def prepare(
    repo: Repo,
    config: Config,
    scratch: Path,
    ticket: str | None,
    deadline: Deadline | None,
    *,
    via_index: bool = False,
    status: Started | None = None,
) -> Prepared:
    """Write the snapshot's trees (the work tree, the staged state); record nothing.

    The status pass reads the user's index where it is (git never writes it: optional locks
    are off), so git's stat cache decides which files to read. The trees are built from HEAD
    plus the changed paths (see treebuild.py). ``via_index`` builds them instead with
    ``update-index`` and ``write-tree`` on a private copy of the index, scanned again: slower
    on big repositories, and the fallback for submodule changes and for files that vanish
    while they are read.
    """

    git = _runner(repo, config, repo.index_path)
    scan, chosen = _scan(repo, config, git, deadline, status)
    if ticket is None:
        ticket = tickets.from_branch(scan.branch if scan.head else None)
    ref = checked_ref(git, wip_ref(config, ticket))

    use_edits = not via_index and not any(c.submodule and c.y != "." for c in scan.changes)
    cache = HashCache.load(repo, stamp_now(scratch)) if use_edits else None  # stamp: before reads
    anchors = list(cache.anchors) if cache else []
    found = read_objects(git, [ref, scan.head or ref, *anchors], deadline)  # one process
    prev, head_commit = (
        parse_commit(o[0], o[2]) if o and o[1] == "commit" else None for o in found[:2]
    )
    head_commit = head_commit if scan.head else None
    prev_meta = SnapshotMeta.parse(prev.message) if prev else None
    head_tree = head_commit.tree if head_commit else None
    standing = [  # anchors still at their refs: their trees exist and hold every cached blob
        parse_commit(o[0], o[2])
        for a, o in zip(anchors, found[2:], strict=True)
        if o and o[1] == "commit" and cache is not None and cache.anchors[a] == o[0]
    ]
    with ObjectReader(git, deadline) as objects:  # a session only when trees are built
        if cache is not None:
            cache.verify(git, bool(standing), deadline)
            existing = {t for c in [prev, *standing] if c for t in _trees_of(c)}
            try:
                index_tree, tree = _trees_via_edits(
                    repo, git, objects, scratch, scan, chosen, head_tree, deadline, cache, existing
                )
            except (GitError, OSError, ValueError):
                cache = None  # a file vanished or turned unreadable: git's index code decides
        if cache is None:
            import shutil

            index = scratch / "index"
            if repo.index_path.exists():
                shutil.copy2(repo.index_path, index)  # copy2 keeps the mtime: racy-clean check
            git = _runner(repo, config, index)
            scan, chosen = _scan(repo, config, git, deadline)
            head_commit = objects.commit(scan.head) if scan.head else None
            head_tree = head_commit.tree if head_commit else None
            index_tree, tree = _trees_via_index(git, scan, chosen.included, head_tree, deadline)
    return Prepared(
        repo=repo,
        git=git,
        ticket=ticket,
        ref=ref,
        head=scan.head,
        head_tree=head_tree,
        branch=scan.branch,
        index_tree=index_tree,
        staged=scan.staged,
        tree=tree,
        files_changed=scan.changed + len(chosen.included),
        clean=scan.changed == 0 and not chosen.included,
        skipped=chosen.skipped,
        conflicted=scan.conflicted,
        prev=prev,
        prev_meta=prev_meta,
        cache=cache,
    )


def _trees_of(commit: CommitObject) -> list[str]:
    """A snapshot's work-tree tree and, from its trailers, its staged tree."""
    meta = SnapshotMeta.parse(commit.message)
    return [commit.tree, *([meta.index_tree] if meta and meta.index_tree else [])]


def _runner(repo: Repo, config: Config, index: Path) -> Git:
    git = repo.git.with_index(index)
    if config.snapshot.fsync:  # git before 2.36 ignores these keys (it has no core.fsync)
        git = git.with_config("core.fsync=loose-object,reference", "core.fsyncMethod=batch")
    return git


def _scan(
    repo: Repo, config: Config, git: Git, deadline: Deadline | None, started: Started | None = None
) -> tuple[StatusScan, Selection]:
    status = scan_status(git, deadline, started)
    return status, select_untracked(repo.toplevel, status.untracked, status.nested, config.snapshot)


def _trees_via_edits(
    repo: Repo,
    git: Git,
    objects: ObjectReader,
    scratch: Path,
    status: StatusScan,
    chosen: Selection,
    head_tree: str | None,
    deadline: Deadline | None,
    cache: HashCache,
    existing: set[str],
) -> tuple[str | None, str]:
    """(staged tree, work tree) as HEAD's tree plus edits, hashing only changed files (and
    only those the cache does not know). A tree the cache says was built from the same edits
    is taken as it is when it is one of ``existing`` (the trees of snapshots still at their
    refs, so it is in the object store)."""

    staged: dict[bytes, Edit] = {}
    worktree: dict[bytes, Edit] = {}
    to_hash: dict[bytes, Known] = {}
    for change in status.changes:
        path = os.fsencode(change.path)
        in_index = None if change.index_mode == "000000" else (change.index_mode, change.index_oid)
        if change.x != ".":
            staged[path] = in_index
        if change.y == ".":
            worktree[path] = in_index
        else:
            to_hash[path] = Known(in_index[0] if in_index else None, change.worktree_mode)
    for name in status.conflicted + chosen.included:
        to_hash[os.fsencode(name)] = Known(None, None)
    if to_hash:
        stats = {os.fsencode(p): st for p, st in chosen.stats.items()}
        edits = hash_worktree(git, repo.toplevel, scratch, to_hash, deadline, cache, stats)
        worktree.update(edits)
    with TreeWriter(git, objects, repo.object_format, deadline) as trees:

        def build(kind: str, edits: dict[bytes, Edit]) -> str:
            key = tree_key(head_tree, edits)
            tree = cache.tree(kind, key, existing) or trees.build(head_tree, edits)
            cache.remember_tree(kind, key, tree)
            return tree

        index_tree = None if status.conflicted else build("staged", staged)
        return index_tree, build("work", worktree)


def _trees_via_index(
    git: Git,
    status: StatusScan,
    untracked: list[str],
    head_tree: str | None,
    deadline: Deadline | None,
) -> tuple[str | None, str]:
    """(staged tree, work tree) by updating the private copy of the index."""
    index_tree: str | None = None
    if not status.conflicted:
        if status.staged or head_tree is None:
            index_tree = git.out(["write-tree"], deadline=deadline)
        else:
            index_tree = head_tree
    updates = list(dict.fromkeys(status.worktree_changed + status.conflicted + untracked))
    if not updates:
        assert index_tree is not None
        return index_tree, index_tree
    payload = b"".join(os.fsencode(p) + b"\0" for p in updates)
    git.run(
        ["update-index", "--add", "--remove", "--index-version", "4", "-z", "--stdin"],
        input=payload,
        deadline=deadline,
    )
    return index_tree, git.out(["write-tree"], deadline=deadline)
