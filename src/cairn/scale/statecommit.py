"""A ticket's run state (``<state root>/tickets/<ticket>/``: marker, lease, run directories) as
a git commit, so it travels to the shared remote beside the branch and the snapshot, and back
into another worker's clone."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from cairn.errors import GitError
from cairn.git import Git
from cairn.util.durable import TEMP_PREFIX

EXCLUDE = (".lock",)  # the flock file: a machine-local lock, never state
TRIES = 3


def commit(git: Git, directory: Path, parent: str | None, message: str) -> str | None:
    """A commit of ``directory``'s files (parent: the previous state commit); None when the
    directory does not exist. An unchanged tree gives back ``parent``."""
    if not directory.is_dir():
        return parent
    for attempt in range(1, TRIES + 1):
        try:
            tree = _tree(git, directory)
            break
        except GitError:  # a file removed between git's listing and its look at it
            if attempt == TRIES:
                raise
    if parent is not None and git.out(["rev-parse", f"{parent}^{{tree}}"]).strip() == tree:
        return parent
    args = ["commit-tree", tree, "-m", message]
    if parent is not None:
        args += ["-p", parent]
    return git.out(args).strip()


def _tree(git: Git, directory: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="cairn-state-") as scratch:
        indexed = git.with_index(Path(scratch) / "index")
        tree_git = indexed.replace(cwd=directory)
        # the run writes while this reads: its atomic writes' temp files come and go
        temps = f":(exclude,glob)**/{TEMP_PREFIX}*"
        tree_git.run(["--work-tree", str(directory), "add", "-A", "-f", "--", ".", temps])
        for name in EXCLUDE:
            tree_git.run(["rm", "-q", "--cached", "--ignore-unmatch", "--", name])
        return tree_git.out(["write-tree"]).strip()


def checkout(git: Git, sha: str, directory: Path) -> None:
    """Replace ``directory`` by the files of state commit ``sha``."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="cairn-state-") as scratch:
        indexed = git.with_index(Path(scratch) / "index")
        indexed.run(["read-tree", sha])
        indexed.run(["--work-tree", str(directory), "checkout-index", "-a", "-f"])
