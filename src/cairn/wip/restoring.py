"""``restore``: bring a snapshot back, explicitly and without destroying anything.

In place: take a safety snapshot C of the current state, then write or remove only the paths
where C and the snapshot differ. Refuse, before touching anything, when that would overwrite a
path C could not hold (ignored, over the size cap, inside a nested repo). Never ``git clean``,
never ``reset --hard``, never move HEAD or a branch; restoring C undoes the restore.
With ``to``: materialise the snapshot in a new directory and leave the live tree alone.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgspec

from cairn.config.records import Config
from cairn.errors import BadInput, RestoreRefused
from cairn.git import Deadline, Git, Repo
from cairn.util.text import counted
from cairn.wip.history import load_snapshot, open_repo
from cairn.wip.models import RestoreResult, SnapshotInfo
from cairn.wip.preparing import prepare
from cairn.wip.recording import record
from cairn.wip.scratch import scratch_dir

GITLINK = "160000"


class Plan:
    """What an in-place restore would write and delete, and what stands in its way."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.deletes: list[str] = []
        self.obstacles: list[str] = []
        self.warnings: list[str] = []


def restore(
    workspace: Path | str,
    spec: str,
    to: Path | str | None = None,
    dry_run: bool = False,
    force: bool = False,
    ticket: str | None = None,
    config: Config | None = None,
    warnings: list[str] | None = None,
) -> RestoreResult:
    """Bring ``spec`` back into the work tree (or ``to``); ``warnings``: as ``open_repo``'s."""
    repo, config = open_repo(workspace, config, warnings)
    snap = load_snapshot(repo, config, spec)
    if to is not None:
        return _restore_to(repo, snap, Path(to), dry_run)
    deadline = Deadline(config.agent.cutoff_timeout_ms / 1000)
    replaced: list[str] = []
    with scratch_dir(repo.state_root(), "restore", replaced) as scratch:
        current = prepare(repo, config, scratch, ticket, deadline)
        plan = _plan(repo, current.git, current.tree, snap.tree)
        plan.warnings[:0] = replaced
        if snap.base != current.head:
            plan.warnings.append(
                f"the snapshot was taken on {_short(snap.base)}; HEAD is now {_short(current.head)}"
                "; files are restored as they were, HEAD is not moved"
            )
        result = RestoreResult(
            commit=snap.commit,
            target=str(repo.toplevel),
            to=None,
            dry_run=dry_run,
            safety_commit=None,
            written=plan.writes,
            deleted=plan.deletes,
            obstacles=plan.obstacles,
            skipped_in_snapshot=snap.skipped,
            warnings=plan.warnings,
        )
        if plan.obstacles and not force:
            shown = ", ".join(plan.obstacles[:5]) + (" …" if len(plan.obstacles) > 5 else "")
            if dry_run:  # a dry run reports the obstacles rather than refusing
                return msgspec.structs.replace(
                    result,
                    warnings=[
                        *plan.warnings,
                        f"a restore would refuse: {counted(len(plan.obstacles), 'path')} "
                        f"that no snapshot holds would be overwritten ({shown}); move them "
                        "away or pass --force",
                    ],
                )
            raise RestoreRefused(
                f"restore would overwrite {counted(len(plan.obstacles), 'path')} that no "
                f"snapshot holds (ignored, too large or in a nested repo): {shown}; nothing was "
                "changed; "
                "move them away or pass --force"
            )
        if dry_run:
            return result
        safety = record(current, f"before restore of {snap.commit[:12]}", None, None, force=True)
        _apply(repo, scratch, snap.commit, plan, force)
    return msgspec.structs.replace(result, safety_commit=safety.commit)


def _short(oid: str | None) -> str:
    return oid[:12] if oid else "no commit"


def _plan(repo: Repo, git: Git, current_tree: str, target_tree: str) -> Plan:
    out = git.run(["diff-tree", "-r", "-z", "--no-renames", current_tree, target_tree]).stdout
    fields = out.split(b"\0")
    plan = Plan()
    added: list[str] = []
    for i in range(0, len(fields) - 1, 2):
        old_mode, new_mode, _, _, status = fields[i].decode().lstrip(":").split(" ")
        path = os.fsdecode(fields[i + 1])
        if GITLINK in (old_mode, new_mode):
            plan.warnings.append(f"submodule {path} is left as it is")
        elif status == "D":
            plan.deletes.append(path)
        else:
            plan.writes.append(path)
            if status == "A":
                added.append(path)
    deleting = set(plan.deletes)
    for path in added:
        _check_added(repo.toplevel, path, deleting, plan)
    for path in plan.writes:
        _check_ancestors(repo.toplevel, path, deleting, plan)
    plan.obstacles = sorted(set(plan.obstacles))
    return plan


def _check_added(top: Path, path: str, deleting: set[str], plan: Plan) -> None:
    """A path absent from the safety snapshot must not already exist on disk, unless it is a
    directory whose every file is about to be deleted."""
    full = top / path
    try:
        st = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):  # an ancestor is a file: _check_ancestors
        return
    if not stat.S_ISDIR(st.st_mode):
        plan.obstacles.append(path)
        return
    for root, dirs, files in os.walk(full):
        if ".git" in dirs or ".git" in files:
            plan.obstacles.append(os.path.relpath(root, top) + "/")
            dirs.clear()
            continue
        linked = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        for name in files + linked:
            rel = os.path.relpath(os.path.join(root, name), top)
            if rel not in deleting:
                plan.obstacles.append(rel)


def _check_ancestors(top: Path, path: str, deleting: set[str], plan: Plan) -> None:
    parts = path.split("/")[:-1]
    prefix = ""
    for part in parts:
        prefix = f"{prefix}{part}"
        full = top / prefix
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            if prefix not in deleting:
                plan.obstacles.append(prefix)
            return
        if (full / ".git").exists():
            plan.obstacles.append(path)  # only this file; --force must not remove the repo
            return
        prefix += "/"


def _apply(repo: Repo, scratch: Path, commit: str, plan: Plan, force: bool) -> None:
    top = repo.toplevel
    if force:
        for obstacle in plan.obstacles:
            _remove(top / obstacle.rstrip("/"))
    for path in plan.deletes:
        full = top / path
        if os.path.lexists(full):
            os.unlink(full)
        _prune_empty_parents(top, full.parent)
    if plan.writes:
        git = repo.git.with_index(scratch / "restore-index")
        git.run(["read-tree", commit])
        payload = b"".join(os.fsencode(p) + b"\0" for p in plan.writes)
        git.run(["checkout-index", "-f", "-z", "--stdin"], input=payload)


def _remove(full: Path) -> None:
    if full.is_dir() and not full.is_symlink():
        import shutil  # only for a directory in the way

        shutil.rmtree(full)
    elif os.path.lexists(full):
        os.unlink(full)


def _prune_empty_parents(top: Path, directory: Path) -> None:
    while directory != top and top in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent


def _restore_to(repo: Repo, snap: SnapshotInfo, target: Path, dry_run: bool) -> RestoreResult:
    target = target.expanduser().absolute()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BadInput(f"{target} already exists and is not empty; pass --to a new directory")
    real = target.resolve()  # `..` and symlinks must not lead back into the work tree
    if real == repo.toplevel or repo.toplevel in real.parents:
        raise BadInput(f"{target} is inside the work tree; pass --to a directory outside it")
    names = repo.git.run(["ls-tree", "-r", "-z", "--name-only", snap.commit]).stdout
    written = [os.fsdecode(n) for n in names.split(b"\0") if n]
    if not dry_run:
        target.mkdir(parents=True, exist_ok=True)
        with scratch_dir(repo.state_root(), "restore") as scratch:
            git = repo.git.with_index(scratch / "restore-index")
            git.run(["read-tree", snap.commit])
            git.run(["checkout-index", "-a", "-f", f"--prefix={target}/"])
    return RestoreResult(
        commit=snap.commit,
        target=str(target),
        to=str(target),
        dry_run=dry_run,
        safety_commit=None,
        written=written,
        deleted=[],
        obstacles=[],
        skipped_in_snapshot=snap.skipped,
    )
