"""A ticket's run state (``<state root>/tickets/<ticket>/``: marker, lease, run directories) as
a git commit, so it travels to the shared remote beside the branch and the snapshot, and back
into another worker's clone."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cairn.errors import GitError
from cairn.git import Git
from cairn.util.durable import TEMP_PREFIX

EXCLUDE = (".lock",)  # the flock file: a machine-local lock, never state
TRIES = 3
ATTEMPT = "Cairn-Attempt"  # the trailer naming the activity attempt (shown, never compared)
GENERATION = "Cairn-Generation"  # the fencing token: the remote's generation + 1 at each claim
SEGMENT = "Cairn-Segment"  # the activity (workflow run/activity id) whose attempt made it


@dataclass(frozen=True)
class Claim:
    """What a state commit says of the attempt that made it."""

    generation: int = 0  # 0 for a commit without the trailer (made before generations)
    attempt: int = 0
    segment: str = ""


def claim_of(git: Git, sha: str) -> Claim:
    """The trailers of state commit ``sha``."""
    found: dict[str, str] = {}
    for line in git.out(["log", "-1", "--format=%B", sha]).splitlines():
        name, _, value = line.partition(": ")
        found.setdefault(name, value.strip())
    number = {k: int(v) for k, v in found.items() if k in (GENERATION, ATTEMPT) and v.isdigit()}
    return Claim(number.get(GENERATION, 0), number.get(ATTEMPT, 0), found.get(SEGMENT, ""))


def commit(git: Git, directory: Path, parent: str | None, ticket: str, claim: Claim) -> str:
    """A commit of ``directory``'s files on ``parent`` (the previous state commit), naming
    ``claim``. An unchanged tree of the same generation gives back ``parent``: an attempt's
    first commit (its claim, one generation above the remote's) is always a new one."""
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
        and claim_of(git, parent).generation == claim.generation
    ):
        return parent
    message = (
        f"cairn state {ticket}\n\n{GENERATION}: {claim.generation}\n{ATTEMPT}: {claim.attempt}\n"
    )
    if claim.segment:
        message += f"{SEGMENT}: {claim.segment}\n"
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


def clear(directory: Path) -> None:
    """``directory``, empty."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)


def checkout(git: Git, sha: str, directory: Path) -> None:
    """Replace ``directory`` by the files of state commit ``sha``."""
    clear(directory)
    with tempfile.TemporaryDirectory(prefix="cairn-state-") as scratch:
        indexed = git.with_index(Path(scratch) / "index")
        indexed.run(["read-tree", sha])
        indexed.run(["--work-tree", str(directory), "checkout-index", "-a", "-f"])
