"""Random work trees for ``snapshot_fuzz``: a first commit, then random edits, all decided by
one seed so a failing tree can be rebuilt exactly (``--replay SEED``).

Names come from a pool with spaces, tabs, newlines, quotes, backslashes, a leading dash,
non-ASCII and invalid UTF-8 bytes, long names; edits write, grow past the size cap, delete,
chmod, make symlinks (to files, directories, nothing), change a path's type between file,
symlink and directory, rename (with and without git), stage and then modify, stage everything,
commit, and write ignored files.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from common import git

CAP = 4096  # snapshot.max_new_file_bytes in the fuzzed repositories
GITIGNORE = "*.log\nbuild/\nignored-*\n"
CONFIG = f"[snapshot]\nmax_new_file_bytes = {CAP}\n"

DIRS = ["", "src/", "src/deep/er/", "with space/", "ünï/", "-dash/", "tab\tdir/", "nl\ndir/"]
BASES = [
    "a.txt",
    "b",
    "sp ace.md",
    "ñé.txt",
    "-x",
    "nl\nname",
    'q"uote',
    "back\\slash",
    "star*?",
    "emoji-🐍.py",
    "long-" + "x" * 180,
    os.fsdecode(b"bad-\xff\xfe.bin"),
    ".hidden",
    "run.sh",
    "dir-or-file",
]
IGNORED = ["build/out.bin", "x.log", "src/ignored-cache", "with space/debug.log"]
LINK_TARGETS = ["a.txt", "src", "missing", "../b", "src/deep/er/b", "/etc/hostname", ""]


class Tree:
    """One repository and the random edits applied to it."""

    def __init__(self, repo: Path, rng: random.Random) -> None:
        self.repo = repo
        self.rng = rng
        self.pool = [d + b for d in DIRS for b in BASES]
        rng.shuffle(self.pool)
        self.pool = self.pool[: rng.randint(8, 40)]
        self.edits: list[str] = []

    # --- content ----------------------------------------------------------------------------

    def content(self, oversized: bool = False) -> bytes:
        rng = self.rng
        if oversized:
            return rng.randbytes(rng.randint(CAP + 1, 3 * CAP))
        roll = rng.random()
        if roll < 0.15:
            return b""
        if roll < 0.6:
            lines = rng.randint(1, 40)
            return "".join(f"line {rng.randint(0, 999)} ñ\n" for _ in range(lines)).encode()
        return rng.randbytes(rng.randint(1, CAP))

    # --- making room for a path ---------------------------------------------------------------

    def clear_parents(self, rel: str) -> None:
        """Make every parent of ``rel`` a real directory: a file or symlink in the way is
        removed (a type change file → directory)."""
        parent = self.repo
        for part in Path(rel).parts[:-1]:
            parent = parent / part
            if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
                parent.unlink()
            parent.mkdir(exist_ok=True)

    def clear(self, rel: str) -> Path:
        """Make room for a new entry at ``rel``: a directory there is removed (directory →
        file or symlink), a file or symlink is unlinked."""
        self.clear_parents(rel)
        path = self.repo / rel
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        return path

    def existing(self) -> list[str]:
        return [p for p in self.pool if os.path.lexists(self.repo / p)]

    def regular_files(self) -> list[str]:
        """Existing regular files (never a symlink: nothing is written through a link)."""
        return [
            p
            for p in self.existing()
            if (self.repo / p).is_file() and not (self.repo / p).is_symlink()
        ]

    # --- edits ------------------------------------------------------------------------------

    def write(self, rel: str, data: bytes, executable: bool = False) -> None:
        path = self.clear(rel)
        path.write_bytes(data)
        path.chmod(0o755 if executable else 0o644)

    def edit_write(self) -> None:
        rel = self.rng.choice(self.pool)
        self.write(rel, self.content(), self.rng.random() < 0.2)
        self.edits.append(f"write {rel!r}")

    def edit_oversized(self) -> None:
        rel = self.rng.choice(self.pool)
        self.write(rel, self.content(oversized=True))
        self.edits.append(f"oversized {rel!r}")

    def edit_append(self) -> None:
        files = self.regular_files()
        if files:
            rel = self.rng.choice(files)
            with (self.repo / rel).open("ab") as handle:
                handle.write(self.content())
            self.edits.append(f"append {rel!r}")

    def edit_delete(self) -> None:
        present = self.existing()
        if present:
            rel = self.rng.choice(present)
            self.clear(rel)
            self.edits.append(f"delete {rel!r}")

    def edit_chmod(self) -> None:
        files = self.regular_files()
        if files:
            rel = self.rng.choice(files)
            mode = (self.repo / rel).stat().st_mode
            (self.repo / rel).chmod(mode ^ 0o111)
            self.edits.append(f"chmod {rel!r}")

    def edit_symlink(self) -> None:
        rel = self.rng.choice(self.pool)
        target = self.rng.choice(LINK_TARGETS) or self.rng.choice(self.pool)
        self.clear(rel)
        os.symlink(target, self.repo / rel)
        self.edits.append(f"symlink {rel!r} -> {target!r}")

    def edit_directory(self) -> None:
        """A path that was a file or a link becomes a directory with a file in it."""
        rel = self.rng.choice(self.pool)
        self.write(f"{rel}/inside.txt", self.content())
        self.edits.append(f"directory {rel!r}")

    def edit_rename(self) -> None:
        present = [p for p in self.existing() if not (self.repo / p).is_dir()]
        if not present:
            return
        old, new = self.rng.choice(present), self.rng.choice(self.pool)
        if old == new or new.startswith(old + "/") or old.startswith(new + "/"):
            return
        with_git = self.rng.random() < 0.5 and self.tracked(old)
        self.clear(new)
        if with_git and not os.path.lexists(self.repo / new):
            git(self.repo, "mv", "-f", "--", old, new, check=False)
        if os.path.lexists(self.repo / old):
            os.rename(self.repo / old, self.repo / new)
        self.edits.append(f"rename {old!r} -> {new!r}" + (" (git mv)" if with_git else ""))

    def edit_stage_then_modify(self) -> None:
        present = self.existing()
        if not present:
            return
        rel = self.rng.choice(present)
        git(self.repo, "add", "-A", "--", rel, check=False)
        if (self.repo / rel).is_file() and not (self.repo / rel).is_symlink():
            with (self.repo / rel).open("ab") as handle:
                handle.write(b"after staging\n")
        self.edits.append(f"stage then modify {rel!r}")

    def edit_stage_all(self) -> None:
        git(self.repo, "add", "-A")
        self.edits.append("stage all")

    def edit_commit(self) -> None:
        git(self.repo, "commit", "-q", "--allow-empty", "-m", "edit")
        self.edits.append("commit")

    def edit_ignored(self) -> None:
        rel = self.rng.choice(IGNORED)
        self.write(rel, self.content(oversized=self.rng.random() < 0.3))
        self.edits.append(f"ignored {rel!r}")

    def tracked(self, rel: str) -> bool:
        return bool(git(self.repo, "ls-files", "--", rel, check=False).strip())

    EDITS: ClassVar[tuple[tuple[int, str], ...]] = (
        (6, "edit_write"),
        (2, "edit_oversized"),
        (2, "edit_append"),
        (2, "edit_delete"),
        (1, "edit_chmod"),
        (2, "edit_symlink"),
        (1, "edit_directory"),
        (2, "edit_rename"),
        (2, "edit_stage_then_modify"),
        (1, "edit_stage_all"),
        (1, "edit_commit"),
        (1, "edit_ignored"),
    )

    def random_edit(self) -> None:
        names = [name for weight, name in self.EDITS for _ in range(weight)]
        edit: Callable[[], None] = getattr(self, self.rng.choice(names))
        edit()


def build(repo: Path, seed: int) -> Tree:
    """A repository at ``repo`` with a random first commit (sometimes none) and random edits."""
    rng = random.Random(seed)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    tree = Tree(repo, rng)
    (repo / ".gitignore").write_text(GITIGNORE)
    (repo / "cairn.toml").write_text(CONFIG)
    for _ in range(rng.randint(3, 20)):
        tree.edit_write()
    if rng.random() < 0.2:
        tree.edit_symlink()
    if rng.random() < 0.9:  # otherwise HEAD stays unborn
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "initial")
        tree.edits.append("first commit")
    for _ in range(rng.randint(1, 30)):
        tree.random_edit()
    return tree
