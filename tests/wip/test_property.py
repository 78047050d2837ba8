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
from pathlib import Path

import pytest
from hypothesis import given

from cairn import wip
from helpers import fingerprint, git, tree_state, without_worktree, write
from wip.wip_setup import (
    KINDS,
    PROPERTY_SETTINGS,
    Edit,
    apply,
    edit_lists,
    fresh_repo,
    initial_trees,
    pools,
    unborn_head,
)

pytestmark = pytest.mark.slow

MARKER = "zz-marker"  # outside PATHS: makes a clean tree dirty when a snapshot is needed


KINDS += ["stage-all"]


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
