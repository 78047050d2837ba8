"""Property-based: over random trees and random edit sequences, save → restore is exact.

1. After any sequence of edits (files, nested dirs, exec bits, symlinks, staging, commits),
   ``wip.save`` then ``wip.restore(..., to=new_dir)`` reproduces the work tree exactly.
2. save → more random edits → in-place restore of the snapshot gives the snapshot-time tree, and
   restoring the safety snapshot it recorded gives the post-edit tree back; neither restore
   touches HEAD, a branch or the index file.

Each example gets its own repository in a fresh ``tempfile.mkdtemp()``. File names come from a
small alphabet plus nasty names; directory names never collide with file names, so every edit
sequence is valid. No file is ignored or over the size cap, so the whole tree must round-trip.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn import wip
from helpers import fingerprint, git, make_repo, tree_state, without_worktree, write

pytestmark = pytest.mark.slow

DIRS = ["", "d/", "d/sub/", "e e/", "ü/"]
BASES = ["a", "b.txt", "sp ace", "ñé", "-x", "nl\nx", "c.sh"]
PATHS = [d + b for d in DIRS for b in BASES]  # no directory name is also a file name
LINK_TARGETS = ["a", "d", "d/sub", "missing", "../b.txt", "d/sub/-x", "ü/ñé"]
MARKER = "zz-marker"  # outside PATHS: makes a clean tree dirty when a snapshot is needed

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
KINDS += ["stage-all"]
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


def snapshot_now(repo: Path, ticket: str) -> str:
    result = wip.save(repo, ticket=ticket, reason="property")
    if result.commit is None:  # clean tree and no earlier snapshot: nothing was recorded
        assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
        write(repo, MARKER, "dirty\n")
        result = wip.save(repo, ticket=ticket, reason="property")
    assert result.commit is not None
    return result.commit


@PROPERTY_SETTINGS
@given(pool=pools, initial=initial_trees, unborn=unborn_head, edits=edit_lists)
def test_save_then_restore_to_a_new_dir_is_exact(
    pool: list[str], initial: dict[int, tuple[bytes, bool]], unborn: bool, edits: list[Edit]
) -> None:
    with fresh_repo(pool, initial, unborn) as repo:
        for op in edits:
            apply(repo, pool, op)
        expected = tree_state(repo)
        prints = fingerprint(repo)

        commit = snapshot_now(repo, "prop")
        if os.path.lexists(repo / MARKER):
            expected = tree_state(repo)
            prints = fingerprint(repo)
        out = repo.parent / "restored"
        result = wip.restore(repo, "prop", to=out)

        assert result.commit == commit
        assert tree_state(out) == expected
        assert fingerprint(repo) == prints  # neither save nor restore --to touched the repo


@PROPERTY_SETTINGS
@given(pool=pools, initial=initial_trees, unborn=unborn_head, before=edit_lists, after=edit_lists)
def test_in_place_restore_and_its_undo_are_exact(
    pool: list[str],
    initial: dict[int, tuple[bytes, bool]],
    unborn: bool,
    before: list[Edit],
    after: list[Edit],
) -> None:
    with fresh_repo(pool, initial, unborn) as repo:
        for op in before:
            apply(repo, pool, op)
        commit = snapshot_now(repo, "prop")
        at_snapshot = tree_state(repo)
        for op in after:
            apply(repo, pool, op)
        post_edit = tree_state(repo)
        prints = without_worktree(fingerprint(repo))

        result = wip.restore(repo, commit)

        assert tree_state(repo) == at_snapshot
        assert without_worktree(fingerprint(repo)) == prints
        assert result.safety_commit is not None

        wip.restore(repo, result.safety_commit)

        assert tree_state(repo) == post_edit
        assert without_worktree(fingerprint(repo)) == prints
