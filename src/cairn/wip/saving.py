"""``save``: snapshot the work tree into ``refs/cairn/wip/<ticket>`` without touching it.

Pipeline (see docs/snapshots.md): ``status`` reading the real index in place → choose untracked
files → hash the changed files the stat cache does not know and write the trees on their paths
(HEAD's tree plus edits) → ``commit-tree`` → ``update-ref`` with the old value
(compare-and-swap; ``wip/recording.py``). The user's index is only ever read.

A save that the no-op proof (``cairn.wip.proof``) answers needs none of that: this module
imports, at its top, only what the proof needs (the early ``git status``, the proof), and the
engine (the config's validation, the records, the scan, the tree building) when a save goes on
to build trees.
"""

from __future__ import annotations

import os
import re
import time

from cairn.defaults import CUTOFF_TIMEOUT_MS
from cairn.git.status import start_early
from cairn.wip import proof

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from pathlib import Path

    from cairn.config import Config
    from cairn.git import Deadline, Git, Repo
    from cairn.git.discovery import Found
    from cairn.git.process import Started
    from cairn.git.status import Early
    from cairn.wip.hashcache import HashCache
    from cairn.wip.models import SaveResult
    from cairn.wip.objects import CommitObject, ObjectReader
    from cairn.wip.proof import Proof
    from cairn.wip.recording import Prepared
    from cairn.wip.scan import Selection, StatusScan
    from cairn.wip.treebuild import Edit, Known

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
        from cairn.errors import BadInput

        raise BadInput(f"{ref!r} is not a valid git ref name; choose another ticket id")
    return ref


def save(
    workspace: Path | str = ".",
    ticket: str | None = None,
    reason: str = "manual",
    timeout: float | None = None,
    run_id: str | None = None,
    config: Config | None = None,
    mirror_branch: bool | None = None,
    early: Early | None = None,
) -> SaveResult:
    """Snapshot ``workspace``; ``timeout`` seconds (default ``agent.cutoff_timeout_ms``).

    ``git status``, the bulk of a save on a big repository, starts first with the repository's
    discovery (or both were started by the caller: ``early``, from
    ``cairn.git.status.start_early(workspace)``, which the save then owns) and runs while the
    config is read and the stat cache loaded.

    When nothing changed since the last save with the same ``ticket`` and ``run_id``, the
    no-op proof (``cairn.wip.proof``) answers from ``git status`` alone.
    """
    started = time.monotonic()
    done = save_or_proof(workspace, ticket, reason, timeout, run_id, config, mirror_branch, early)
    if isinstance(done, proof.Proof):
        return proven_result(done, reason, int((time.monotonic() - started) * 1000))
    return done


def save_or_proof(
    workspace: Path | str = ".",
    ticket: str | None = None,
    reason: str = "manual",
    timeout: float | None = None,
    run_id: str | None = None,
    config: Config | None = None,
    mirror_branch: bool | None = None,
    early: Early | None = None,
) -> SaveResult | Proof:
    """``save``, except that a save the no-op proof answers returns the proof (what its result
    is made of, ``proven_result``): the command line prints its one line and the Stop hook
    nothing, and neither loads the records library. Before the proof is asked, a save loads
    the config only when a file holds one, and no more of the engine than that."""
    from cairn.errors import SaveTimeout
    from cairn.git.process import Deadline

    started = time.monotonic()
    where = os.fspath(workspace) or "."
    if early is not None and early.workspace != where:
        early.abandon()  # started for another work tree
        early = None
    if early is None:
        early = start_early(where)
    status = early.status
    try:
        warnings: list[str] = []
        provable = config is None and status is not None  # the proof knows the config's files
        found = _found(early) if provable else None  # None: Repo.discover says what is wrong
        repo = None
        if found is None:
            repo = _discover(workspace, early)
            found = paths_of(repo)
        if config is None and proof.config_present(found.toplevel):
            config = _load_config(found.toplevel, warnings)
        if ticket is not None or run_id is not None:
            from cairn import tickets

            for name in (ticket, run_id):
                if name is not None:
                    tickets.validate(name)
        budget = config.agent.cutoff_timeout_ms if config is not None else CUTOFF_TIMEOUT_MS
        seconds = timeout if timeout is not None else budget / 1000
        deadline = Deadline(seconds)
        try:
            out = status.result(deadline=deadline).stdout if provable and status else b""
            key = proof.key(found, out, ticket, run_id) if provable else None  # once a save
            proven = proof.holds(found, key, ticket, run_id) if not warnings else None
            if proven is not None:
                return proven
            from cairn.config import Config
            from cairn.wip.meta import clean_reason
            from cairn.wip.recording import record
            from cairn.wip.scratch import scratch_dir

            repo = repo or _discover(workspace, early)  # the discovery's answer, read once
            if config is None:
                config = Config()  # no file holds one
            if mirror_branch is None:
                mirror_branch = config.agent.preserve_uncommitted_work_branch
            with scratch_dir(repo.state_root(), "save", warnings) as scratch:
                prepared = prepare(repo, config, scratch, ticket, deadline, status=status)
                result = record(
                    prepared, clean_reason(reason), run_id, deadline, mirror_branch=mirror_branch
                )
                if prepared.cache is not None and result.commit:
                    prepared.cache.save(prepared.ref, result.commit)
            if provable:
                keep_proof(found, key, ticket, run_id, prepared, result, warnings)
        except SaveTimeout as exc:
            raise SaveTimeout(
                f"snapshot abandoned after {seconds * 1000:.0f} ms ({exc}); no ref was moved; "
                "raise agent.cutoff_timeout_ms or pass --timeout-ms"
            ) from None
    finally:
        early.abandon()  # after an early error; nothing to do once their results were read
    import msgspec

    elapsed = int((time.monotonic() - started) * 1000)
    return msgspec.structs.replace(
        result, elapsed_ms=elapsed, warnings=[*warnings, *result.warnings]
    )


def _found(early: Early) -> Found | None:
    """The work tree's paths from the discovery ``start_early`` started; None when it did not
    start or did not find a work tree."""
    from cairn.git.discovery import parse

    if early.discovery is None:
        return None
    result = early.discovery.result(check=False)
    return parse(result.returncode, result.stdout)


def _discover(workspace: Path | str, early: Early) -> Repo:
    from cairn.git import Repo

    return Repo.discover(workspace, early.discovery)


def _load_config(toplevel: str, warnings: list[str]) -> Config:
    from pathlib import Path

    from cairn.config import load

    return load(Path(toplevel), warnings)


def paths_of(repo: Repo) -> Found:
    from cairn.git.discovery import Found

    return Found(
        os.fspath(repo.toplevel),
        os.fspath(repo.git_dir),
        os.fspath(repo.common_dir),
        os.fspath(repo.index_path),
        repo.object_format,
    )


def proven_result(proven: Proof, reason: str, elapsed_ms: int = 0) -> SaveResult:
    """The result of a save the proof showed would record nothing."""
    from cairn.wip.meta import clean_reason
    from cairn.wip.models import SaveResult

    return SaveResult(
        ref=proven.ref,
        commit=proven.commit,
        created=False,
        base=proven.base,
        branch=proven.branch,
        files_changed=proven.files_changed,
        skipped=[],
        elapsed_ms=elapsed_ms,
        ticket=proven.ticket,
        reason=clean_reason(reason),
        conflicted=[],
        previous=None,
        warnings=[],
    )


def keep_proof(
    found: Found,
    key: proof.Key | None,
    ticket: str | None,
    run_id: str | None,
    prepared: Prepared,
    result: SaveResult,
    warnings: list[str],
) -> None:
    """Write the proof of this save for the next one, when its answer is one the proof can
    give again (see ``cairn.wip.proof``)."""
    if prepared.cache is None or result.skipped or result.conflicted or result.warnings or warnings:
        return
    kept = proof.Proof(
        key="",
        asked=ticket,
        run=run_id,
        ref=result.ref,
        commit=result.commit,
        ticket=result.ticket,
        files_changed=result.files_changed,
        base=result.base,
        branch=result.branch,
    )
    proof.write(found, key, prepared.cache.stamp, kept)


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
    from cairn import tickets
    from cairn.errors import GitError
    from cairn.wip.hashcache import HashCache, stamp_now
    from cairn.wip.meta import SnapshotMeta
    from cairn.wip.naming import wip_ref
    from cairn.wip.objects import ObjectReader, parse_commit, read_objects
    from cairn.wip.recording import Prepared

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
    from cairn.wip.meta import SnapshotMeta

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
    from cairn.wip.scan import scan_status, select_untracked

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
    from cairn.wip.hashcache import digest as tree_key
    from cairn.wip.treebuild import Known, TreeWriter, hash_worktree

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
