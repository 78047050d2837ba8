"""``git worktree``: the repository's worktree records, read from ``git worktree list
--porcelain``, and the few worktree commands the fleet runs (all through ``cairn.git``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from cairn.errors import BadInput
from cairn.git import Repo

BRANCH_PREFIX = "cairn/"


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


def add(repo: Repo, path: Path, branch: str, base: str | None) -> None:
    """Check ``branch`` out at ``path``; create it at ``base`` first when ``base`` is given."""
    args = ["worktree", "add", "--quiet"]
    args += [str(path), branch] if base is None else ["-b", branch, str(path), base]
    result = repo.git.run(args, check=False)
    if not result.ok:
        raise BadInput(
            f"cannot create the worktree {path} on {branch}: {result.error_line}; "
            "fix the cause (see `git worktree list`) and start again"
        )


def remove(repo: Repo, path: Path) -> None:
    """``git worktree remove --force`` (one ``--force``: a locked worktree is still refused).
    Only called once prune has proved that nothing in the worktree exists nowhere else."""
    repo.git.run(["worktree", "remove", "--force", str(path)])
