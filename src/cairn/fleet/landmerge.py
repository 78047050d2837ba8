"""The git of a land (``cairn.fleet.land``): a ticket branch merged into the fleet's base branch
without ever losing a commit of either side or rewriting the base's history, and without
surprising anyone's work tree.

``plan`` works out the new tip of the base, touching nothing: the branch tip itself when the base
is an ancestor of it (a fast-forward), else a merge commit whose parents are the base's tip and
the branch's (``git merge-tree --write-tree``, then ``git commit-tree``), or the files that
conflict. ``advance`` moves the base there: with ``git update-ref`` and the old tip as a
compare-and-swap when no work tree has the base checked out; else in the work tree that has it,
with ``git merge --ff-only`` (the new tip descends from its ``HEAD``), and only when that tree
has no uncommitted change of a tracked file (``dirty`` says so first). Either way the base only
moves forward.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NamedTuple

from cairn.fleet.gitworktree import listing
from cairn.git import Git, Repo, base_runner

How = Literal["fast_forward", "merge", "already", "conflict", "pull_request"]


class Merge(NamedTuple):
    how: How
    previous: str  # the base's tip before
    commit: str  # the ticket branch's tip
    new: str | None  # the base's tip after (None: a conflict)
    conflicts: list[str]  # the files that conflict (a conflict only)


def tip(git: Git, ref: str) -> str | None:
    found = git.run(["rev-parse", "--verify", "-q", f"{ref}^{{commit}}"], check=False)
    return found.text or None if found.ok else None


def ancestor(git: Git, older: str, newer: str) -> bool:
    return git.run(["merge-base", "--is-ancestor", older, newer], check=False).returncode == 0


def plan(git: Git, base: str, branch: str, message: str) -> Merge:
    """How ``branch`` lands on ``base`` (both full ref names); writes objects only (a merge
    commit no ref points to yet)."""
    previous, commit = tip(git, base), tip(git, branch)
    assert previous is not None and commit is not None  # checked by the caller
    if ancestor(git, commit, previous):
        return Merge("already", previous, commit, previous, [])
    if ancestor(git, previous, commit):
        return Merge("fast_forward", previous, commit, commit, [])
    args = ["merge-tree", "--write-tree", "--name-only", "-z", "--no-messages"]
    found = git.run([*args, previous, commit], check=False)
    if found.returncode not in (0, 1):
        git.run([*args, previous, commit])  # raises GitError with git's own line
    parts = [p for p in found.stdout.decode("utf-8", "surrogateescape").split("\0") if p]
    if found.returncode == 1:
        return Merge("conflict", previous, commit, None, list(dict.fromkeys(parts[1:])))
    tree = parts[0]
    new = git.out(
        ["commit-tree", tree, "-p", previous, "-p", commit, "-F", "-"], input=message.encode()
    )
    return Merge("merge", previous, commit, new.strip(), [])


def checked_out(repo: Repo, base: str) -> Path | None:
    """The work tree that has ``base`` (a full ref name) checked out, if any (one whose
    directory is gone does not count: nothing there can be surprised)."""
    short = base.removeprefix("refs/heads/")
    return next((w.path for w in listing(repo) if w.branch == short and w.path.is_dir()), None)


def dirty(tree: Path) -> list[str]:
    """The tracked files with uncommitted changes in work tree ``tree``."""
    found = base_runner(tree).run(["status", "--porcelain", "--untracked-files=no", "-z"])
    entries = found.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [entry[3:] for entry in entries if len(entry) > 3]


def advance(repo: Repo, base: str, merge: Merge, why: str) -> None:
    """Move ``base`` (a full ref name) from ``merge.previous`` to ``merge.new``; GitError when
    it moved meanwhile, or the work tree that has it checked out refuses (nothing changed)."""
    assert merge.new is not None
    if merge.new == merge.previous:
        return
    tree = checked_out(repo, base)
    if tree is None:
        repo.git.run(["update-ref", "-m", why, base, merge.new, merge.previous], critical=True)
        return
    # git refuses to overwrite a change or an untracked file here, and a HEAD that moved on
    # meanwhile is not an ancestor of the new tip: the fast-forward is refused, nothing lost
    base_runner(tree).run(["merge", "--ff-only", "-q", merge.new])
