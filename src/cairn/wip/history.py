"""Reading snapshots back: list, resolve a name, show, diff."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from cairn import tickets
from cairn.config import load as load_config
from cairn.config.records import Config
from cairn.errors import BadInput
from cairn.git import Git, Repo
from cairn.wip.meta import SnapshotMeta
from cairn.wip.models import DiffStat, ShowResult, SnapshotInfo
from cairn.wip.naming import wip_ref
from cairn.wip.objects import CommitObject, read_commits
from cairn.wip.treebuild import EMPTY_TREE

_FIELD = "%x00"
_RECORD = "%x1e"


def open_repo(
    workspace: Path | str, config: Config | None, warnings: list[str] | None = None
) -> tuple[Repo, Config]:
    """The repository at ``workspace`` and ``config``, else its own (given ``warnings``, the
    defaults when it does not load, and a line there)."""
    repo = Repo.discover(workspace)
    return repo, config or load_config(repo.toplevel, warnings)


def ticket_refs(repo: Repo, config: Config) -> dict[str, str]:
    """Every ticket with snapshots → its ref name."""
    prefix = config.snapshot.ref_prefix.rstrip("/") + "/"
    out = repo.git.out(["for-each-ref", "--format=%(refname)", prefix])
    return {ref[len(prefix) :]: ref for ref in out.splitlines() if ref}


def info(commit: CommitObject, ref: str | None = None) -> SnapshotInfo | None:
    meta = SnapshotMeta.parse(commit.message)
    if meta is None:
        return None
    return SnapshotInfo(
        ticket=meta.ticket,
        ref=ref,
        commit=commit.oid,
        tree=commit.tree,
        time=iso_time(commit.committer_time),
        reason=meta.reason,
        base=meta.base,
        branch=meta.branch,
        index_tree=meta.index_tree,
        files_changed=meta.files_changed,
        skipped_count=meta.skipped_count,
        skipped=meta.skipped,
        conflicted=meta.conflicted,
        run=meta.run,
        seq=meta.seq,
        cairn_version=meta.version,
    )


def iso_time(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).astimezone().isoformat(timespec="seconds")


def chain(git: Git, ref: str, limit: int | None) -> list[SnapshotInfo]:
    """The snapshots of one ref, newest first, following first parents."""
    (tip,) = read_commits(git, [ref])
    tip_info = info(tip, ref) if tip else None
    if tip_info is None:
        return []
    count = tip_info.seq if not limit else min(limit, tip_info.seq)
    fmt = _FIELD.join(["%H", "%T", "%ct", "%P", "%B"]) + _RECORD
    args = ["log", "--first-parent", f"-n{count}", f"--format={fmt}", "--end-of-options", ref, "--"]
    out = git.run(args).stdout
    found: list[SnapshotInfo] = []
    for record in out.decode("utf-8", "replace").split("\x1e"):
        parts = record.strip("\n").split("\x00")
        if len(parts) != 5:
            continue
        oid, tree, when, parents, message = parts
        commit = CommitObject(oid, tree, tuple(parents.split()), int(when), message)
        item = info(commit, ref)
        if item is None or item.ticket != tip_info.ticket:
            break
        found.append(item)
    return found


def list_snapshots(
    workspace: Path | str = ".",
    ticket: str | None = None,
    limit: int | None = 20,
    config: Config | None = None,
    warnings: list[str] | None = None,
) -> list[SnapshotInfo]:
    """Snapshots of every ticket (or one), newest first; ``limit`` per ticket (None: all).
    ``warnings``: as ``open_repo``'s."""
    repo, config = open_repo(workspace, config, warnings)
    refs = ticket_refs(repo, config)
    if ticket is not None:
        tickets.validate(ticket)
        refs = {ticket: refs[ticket]} if ticket in refs else {}
    found: list[SnapshotInfo] = []
    for name in sorted(refs):
        found += chain(repo.git, refs[name], limit)
    return found


def resolve(repo: Repo, config: Config, spec: str) -> tuple[str, str | None]:
    """A snapshot name (``ticket``, ``ticket~N``) or any commit → (commit id, its ticket ref)."""
    if not spec or spec.startswith("-") or any(not c.isprintable() for c in spec):
        raise BadInput(f"{spec!r} is not a snapshot name; use a ticket id or a commit id")
    name, tilde, back = spec.partition("~")
    if tickets.problem(name) is None and (not tilde or back.isdigit()):
        ref = wip_ref(config, name)
        oid = _commit_of(repo.git, f"{ref}{tilde}{back}")
        if oid:
            return oid, ref
    oid = _commit_of(repo.git, spec)
    if oid is None:
        raise BadInput(f"no snapshot ticket or commit named {spec!r}; see `cairn wip list`")
    return oid, None


def _commit_of(git: Git, name: str) -> str | None:
    result = git.run(
        ["rev-parse", "-q", "--verify", "--end-of-options", f"{name}^{{commit}}"], check=False
    )
    return result.text if result.ok else None


def load_snapshot(repo: Repo, config: Config, spec: str) -> SnapshotInfo:
    oid, ref = resolve(repo, config, spec)
    (commit,) = read_commits(repo.git, [oid])
    found = info(commit, ref) if commit else None
    if found is None:
        raise BadInput(f"{spec!r} ({oid[:12]}) is not a cairn snapshot; see `cairn wip list`")
    return found


def show(
    workspace: Path | str,
    spec: str,
    config: Config | None = None,
    warnings: list[str] | None = None,
) -> ShowResult:
    repo, config = open_repo(workspace, config, warnings)
    snap = load_snapshot(repo, config, spec)
    against = snap.base or EMPTY_TREE[repo.object_format]
    out = repo.git.run(["diff", "--numstat", "-z", "--no-renames", against, snap.commit]).stdout
    stats: list[DiffStat] = []
    for record in out.split(b"\0"):
        if not record:
            continue
        added, deleted, path = record.split(b"\t", 2)
        stats.append(
            DiffStat(
                path=path.decode("utf-8", "surrogateescape"),
                added=None if added == b"-" else int(added),
                deleted=None if deleted == b"-" else int(deleted),
            )
        )
    return ShowResult(snapshot=snap, against=against, diffstat=stats)


def diff(
    workspace: Path | str,
    a: str,
    b: str | None = None,
    stat: bool = False,
    config: Config | None = None,
) -> str:
    """The patch from snapshot ``a``'s base to ``a``; or from ``a`` to ``b`` when given."""
    repo, config = open_repo(workspace, config)
    if b is None:
        snap = load_snapshot(repo, config, a)
        old, new = snap.base or EMPTY_TREE[repo.object_format], snap.commit
    else:
        old, new = resolve(repo, config, a)[0], resolve(repo, config, b)[0]
    args = ["diff", "--no-ext-diff", "--stat" if stat else "--patch", old, new]
    return repo.git.run(args).stdout.decode("utf-8", "replace")


def branch_paths(repo: Repo, base: str | None, snapshot: str | None) -> list[str]:
    """What a run changed: the paths the branch's commits since ``base`` (HEAD when the run
    started) change, and those ``snapshot`` holds uncommitted; sorted, each once. ``base``
    that is gone (history rewritten) counts for nothing."""
    found = set(changed_paths(repo, snapshot)) if snapshot else set()
    if base:
        args = ["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", base, "HEAD", "--"]
        done = repo.git.run(args, check=False)
        if done.ok:
            found |= {p.decode("utf-8", "surrogateescape") for p in done.stdout.split(b"\0") if p}
    return sorted(found)


def changed_paths(repo: Repo, commit: str) -> list[str]:
    """The paths snapshot ``commit`` changes against its base (the HEAD it was taken on): the
    work that was not committed when it was taken. Empty for a commit that is not a snapshot."""
    (found,) = read_commits(repo.git, [commit])
    snap = info(found) if found else None
    if snap is None:
        return []
    against = snap.base or EMPTY_TREE[repo.object_format]
    args = ["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", against, snap.commit]
    out = repo.git.run(args).stdout
    return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]
