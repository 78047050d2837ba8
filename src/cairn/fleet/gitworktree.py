"""``git worktree``: the repository's worktree records, read from ``git worktree list
--porcelain``, and the few worktree commands the fleet runs (all through ``cairn.git``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple

from cairn.errors import BadInput
from cairn.git import Repo
from cairn.util import procs

BRANCH_PREFIX = "cairn/"
INITIALIZING = "initializing"  # the lock reason `git worktree add` holds while it works
BROKEN_GIT_FILE = "its .git file is missing or is not git's"


class Worktree(NamedTuple):
    """One worktree record. ``branch`` is the short name (None when detached or bare)."""

    path: Path
    head: str | None
    branch: str | None
    bare: bool
    locked: str | None  # the lock reason ('' when locked without one)
    prunable: str | None  # why git would prune the record; None when it is live

    def gone(self) -> bool:
        """A stale record: git says prunable, or the directory is not there."""
        return self.prunable is not None or not self.path.is_dir()


def branch_of(ticket: str) -> str:
    return f"{BRANCH_PREFIX}{ticket}"


def same_path(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def listing(repo: Repo) -> list[Worktree]:
    """Every worktree record, the main work tree first."""
    text = repo.git.out(["worktree", "list", "--porcelain"])
    found: list[Worktree] = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            fields[key] = value
        if "worktree" not in fields:
            continue
        branch = fields.get("branch")
        head = fields.get("HEAD")
        found.append(
            Worktree(
                path=Path(fields["worktree"]),
                head=head if head and head.strip("0") else None,  # unborn: all zeros
                branch=branch.removeprefix("refs/heads/") if branch else None,
                bare="bare" in fields,
                locked=fields.get("locked"),
                prunable=fields.get("prunable"),
            )
        )
    return found


def main_worktree(repo: Repo) -> Worktree:
    return listing(repo)[0]


def main_toplevel(repo: Repo) -> Path:
    """The main work tree (for a bare repository, its git directory)."""
    main = main_worktree(repo)
    return repo.common_dir if main.bare else main.path


def branch_tip(repo: Repo, branch: str) -> str | None:
    result = repo.git.run(
        ["rev-parse", "-q", "--verify", "--end-of-options", f"refs/heads/{branch}^{{commit}}"],
        check=False,
    )
    return result.text if result.ok else None


def prune_records(repo: Repo) -> None:
    """``git worktree prune``: drop the records whose directories are gone (locked ones stay)."""
    repo.git.run(["worktree", "prune"])


def add(repo: Repo, path: Path, branch: str, base: str | None, hold: int | None = None) -> None:
    """Check ``branch`` out at ``path``; create it at ``base`` first when ``base`` is given.
    ``hold`` (the worktrees lock) is passed on to git, so a git left running by a killed
    caller keeps the lock until it has finished the worktree."""
    args = ["worktree", "add", "--quiet"]
    args += [str(path), branch] if base is None else ["-b", branch, str(path), base]
    result = repo.git.run(args, check=False, keep_fds=() if hold is None else (hold,))
    if not result.ok:
        raise BadInput(
            f"cannot create the worktree {path} on {branch}: {result.error_line}; "
            "fix the cause (see `git worktree list`) and start again"
        )


def admin_dir(repo: Repo, path: Path) -> Path | None:
    """The worktree's own directory in the repository, ``<git dir>/worktrees/<name>``: the one
    whose ``gitdir`` file names ``<path>/.git``."""
    try:
        entries = list(os.scandir(repo.common_dir / "worktrees"))
    except OSError:
        return None
    for entry in entries:
        try:
            named = Path(entry.path, "gitdir").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if same_path(Path(entry.path, named.strip()), path / ".git"):
            return Path(entry.path)
    return None


def git_file_points_at(path: Path, admin: Path) -> bool:
    """Whether ``<path>/.git`` is a file saying ``gitdir: <admin>``, as git writes it."""
    dot_git = path / ".git"
    try:
        if not stat.S_ISREG(os.lstat(dot_git).st_mode) or dot_git.stat().st_size > 4096:
            return False
        text = dot_git.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    first = text.splitlines()[0] if text.strip() else ""
    return first.startswith("gitdir: ") and same_path(path / first.removeprefix("gitdir: "), admin)


def damage(repo: Repo, entry: Worktree) -> str | None:
    """Why a worktree whose directory is there is not a complete checkout of its branch (None
    when it is): its ``.git`` file is not git's, ``git worktree add`` was killed in it (still
    locked ``initializing``), it has no HEAD, or its files were never all checked out (no
    index)."""
    admin = admin_dir(repo, entry.path)
    if admin is None or not git_file_points_at(entry.path, admin):
        return BROKEN_GIT_FILE
    if entry.locked == INITIALIZING:
        return "git was stopped while making it: it is still locked 'initializing'"
    if entry.head is None:
        return "it has no HEAD commit"
    if not (admin / "index").is_file():
        return "its files were never all checked out: it has no index"
    return None


def stale_locks(repo: Repo, branch: str, admin: Path | None) -> list[Path]:
    """Lock files a killed git left on the ticket's branch or in its worktree's own directory
    (``refs/heads/<branch>.lock``, ``index.lock``, ``HEAD.lock``, ``ORIG_HEAD.lock``): they
    would make every later git there fail. One that a process has open is not stale."""
    found = [repo.common_dir / "refs" / "heads" / f"{branch}.lock"]
    if admin is not None:
        found += [admin / name for name in ("index.lock", "HEAD.lock", "ORIG_HEAD.lock")]
    return [
        path
        for path in found
        if os.path.isfile(path) and not procs.held_open(os.path.abspath(path))
    ]


def repair(repo: Repo, path: Path) -> None:
    """``git worktree repair``: write the worktree's ``.git`` file again from the repository's
    record of it (git answers non-zero even when it repaired; ``damage`` tells)."""
    repo.git.run(["worktree", "repair", str(path)], check=False)


def unlock(repo: Repo, path: Path) -> None:
    repo.git.run(["worktree", "unlock", str(path)], check=False)


def remove(repo: Repo, path: Path) -> None:
    """``git worktree remove --force`` (one ``--force``: a locked worktree is still refused).
    Only called once prune has proved that nothing in the worktree exists nowhere else."""
    repo.git.run(["worktree", "remove", "--force", str(path)])
