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
ATTEMPT = "Cairn-Attempt"  # the trailer naming the activity attempt that made a state commit


def attempt_of(git: Git, sha: str) -> int:
    """The attempt a state commit names (0 for one without the trailer)."""
    body = git.out(["log", "-1", "--format=%B", sha])
    for line in reversed(body.splitlines()):
        name, _, value = line.partition(": ")
        if name == ATTEMPT and value.strip().isdigit():
            return int(value)
    return 0


def commit(git: Git, directory: Path, parent: str | None, ticket: str, attempt: int) -> str:
    """A commit of ``directory``'s files on ``parent`` (the previous state commit), naming
    ``attempt``. An unchanged tree made by the same attempt gives back ``parent``: a new
    attempt always makes its own commit (its claim)."""
    directory.mkdir(parents=True, exist_ok=True)
    for tried in range(1, TRIES + 1):
        try:
            tree = _tree(git, directory)
            break
        except GitError:  # a file removed between git's listing and its look at it
            if tried == TRIES:
                raise
    if (
        parent is not None
        and git.out(["rev-parse", f"{parent}^{{tree}}"]).strip() == tree
        and attempt_of(git, parent) == attempt
    ):
        return parent
    message = f"cairn state {ticket}\n\n{ATTEMPT}: {attempt}\n"
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
