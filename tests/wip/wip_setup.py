"""Helpers shared by the tests in tests/wip/ (not a test module)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from cairn import git as cairn_git
from helpers import git, make_repo, write

DIRS = ["", "d/", "d/sub/", "e e/", "ü/"]
BASES = ["a", "b.txt", "sp ace", "ñé", "-x", "nl\nx", "c.sh"]
PATHS = [d + b for d in DIRS for b in BASES]  # no directory name is also a file name
LINK_TARGETS = ["a", "d", "d/sub", "missing", "../b.txt", "d/sub/-x", "ü/ñé"]


PROPERTY_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

contents = st.one_of(
    st.sampled_from([b"", b"same\n", b"line 1\nline 2\n", b"#!/bin/sh\necho hi\n"]),
    st.binary(max_size=40),
)
index = st.integers(min_value=0, max_value=11)  # into the example's pool of ≤ 12 paths
# an edit: (kind, path index, content, exec bit, link target); weights favour changes that
# leave the tree dirty, so that most examples have something to snapshot
KINDS = ["write"] * 4 + ["symlink"] * 2 + ["delete"] * 2 + ["chmod", "stage", "stage", "commit"]


Edit = tuple[str, int, bytes, bool, str]
ops = st.tuples(
    st.sampled_from(KINDS), index, contents, st.booleans(), st.sampled_from(LINK_TARGETS)
)
pools = st.lists(st.sampled_from(PATHS), min_size=1, max_size=12, unique=True)
initial_trees = st.dictionaries(index, st.tuples(contents, st.booleans()), min_size=1, max_size=8)
unborn_head = st.sampled_from([False, False, False, True])  # sometimes no commit at all
edit_lists = st.lists(ops, min_size=1, max_size=12)


@contextmanager
def fresh_repo(
    pool: list[str], initial: dict[int, tuple[bytes, bool]], unborn: bool
) -> Iterator[Path]:
    """A repository with the files ``initial``, committed unless HEAD is to stay ``unborn``."""
    root = Path(tempfile.mkdtemp(prefix="cairn-prop-"))
    try:
        repo = make_repo(root / "repo", files={})
        for i, (content, exe) in initial.items():
            write(repo, pool[i % len(pool)], content, mode=0o755 if exe else 0o644)
        if not unborn:
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "-m", "initial")
        yield repo
    finally:
        shutil.rmtree(root, ignore_errors=True)


def apply(repo: Path, pool: list[str], op: Edit) -> None:
    kind, i, content, exe, target = op
    rel = pool[i % len(pool)]
    path = repo / rel
    if kind == "write":
        if path.is_symlink():
            path.unlink()
        write(repo, rel, content, mode=0o755 if exe else 0o644)
    elif kind == "symlink":
        if os.path.lexists(path):
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, path)
    elif kind == "delete":
        if os.path.lexists(path):
            path.unlink()
    elif kind == "chmod":
        if path.is_file() and not path.is_symlink():
            path.chmod(0o755 if exe else 0o644)
    elif kind == "stage":
        git(repo, "add", "-A", "--", rel, check=False)  # no match (never existed) is fine
    elif kind == "stage-all":
        git(repo, "add", "-A")
    elif kind == "commit":
        git(repo, "commit", "-q", "--allow-empty", "-m", "edit")
    else:  # pragma: no cover
        raise AssertionError(op)


@contextmanager
def git_calls(spawned: bool = False) -> Iterator[list[str]]:
    """The git subcommands cairn runs meanwhile (git still runs; this only listens); with
    ``spawned``, those started to be read later too (``cairn.git.process.Started``)."""
    from cairn.git.process import Started

    calls: list[str] = []
    original, original_spawn = cairn_git.Git.run, Started.__init__

    def listening(self: Any, args: Any, **kwargs: Any) -> Any:
        calls.append(" ".join(args[:2]) if args[0] == "cat-file" else args[0])
        return original(self, args, **kwargs)

    def listening_spawn(self: Any, args: Any, proc: Any) -> None:
        calls.append(args[0])
        original_spawn(self, args, proc)

    cairn_git.Git.run = listening  # type: ignore[method-assign]
    if spawned:
        Started.__init__ = listening_spawn  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        cairn_git.Git.run = original  # type: ignore[method-assign]
        Started.__init__ = original_spawn  # type: ignore[method-assign]
