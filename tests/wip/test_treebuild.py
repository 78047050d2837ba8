"""The fast tree builder must agree exactly with git's own index code (update-index/write-tree)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from cairn.config.records import Config
from cairn.errors import GitError
from cairn.git import Repo
from cairn.wip import preparing, treebuild
from cairn.wip import save as save_api
from cairn.wip.preparing import prepare
from cairn.wip.scratch import scratch_dir
from cairn.wip.treebuild import quote
from helpers import git, make_conflict, make_repo, snapshot_files, write
from wip.wip_setup import (
    PROPERTY_SETTINGS,
    Edit,
    apply,
    edit_lists,
    fresh_repo,
    initial_trees,
    pools,
    unborn_head,
)


def both_ways(repo: Path) -> tuple[tuple[str | None, str], tuple[str | None, str]]:
    """(staged tree, work tree) from the tree builder and from the index, on the same state."""
    found = Repo.discover(repo)
    results = []
    for via_index in (False, True):
        with scratch_dir(found.state_root(), "test") as scratch:
            p = prepare(found, Config(), scratch, "t", None, via_index=via_index)
            results.append((p.index_tree, p.tree))
    return results[0], results[1]


def assert_same_trees(repo: Path) -> None:
    fast, reference = both_ways(repo)
    assert fast == reference


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(pool=pools, initial=initial_trees, unborn=unborn_head, edits=edit_lists)
def test_builder_matches_git_index_on_random_states(
    pool: list[str], initial: dict[int, tuple[bytes, bool]], unborn: bool, edits: list[Edit]
) -> None:
    with fresh_repo(pool, initial, unborn) as repo:
        for op in edits:
            apply(repo, pool, op)
        assert_same_trees(repo)


def test_file_and_directory_swaps(repo: Path) -> None:
    write(repo, "dir/a.txt", "a")
    write(repo, "dir/sub/b.txt", "b")
    write(repo, "file", "f")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "shapes")
    for path in ("dir/a.txt", "dir/sub/b.txt"):
        (repo / path).unlink()
    (repo / "dir/sub").rmdir()
    (repo / "dir").rmdir()
    write(repo, "dir", "now a file")
    (repo / "file").unlink()
    write(repo, "file/inside.txt", "now a directory")
    assert_same_trees(repo)
    files = snapshot_files(repo, save_api(repo).commit)
    assert files["dir"] == b"now a file"
    assert files["file/inside.txt"] == b"now a directory"


def test_emptied_directories_disappear(repo: Path) -> None:
    (repo / "src/app.py").unlink()
    assert_same_trees(repo)
    assert not any(p.startswith("src/") for p in snapshot_files(repo, save_api(repo).commit))


def test_clean_filters_and_line_endings_apply_like_git_add(repo: Path) -> None:
    git(repo, "config", "filter.upper.clean", "tr a-z A-Z")
    git(repo, "config", "core.autocrlf", "input")
    write(repo, ".gitattributes", "*.up filter=upper\n")
    write(repo, "shout.up", "quiet words\n")
    write(repo, "dos.txt", b"one\r\ntwo\r\n")
    assert_same_trees(repo)
    files = snapshot_files(repo, save_api(repo).commit)
    assert files["shout.up"] == b"QUIET WORDS\n"
    assert files["dos.txt"] == b"one\ntwo\n"


def test_core_filemode_false_keeps_recorded_modes(repo: Path) -> None:
    write(repo, "tool.sh", "#!/bin/sh\n", mode=0o755)
    git(repo, "add", "tool.sh")
    git(repo, "commit", "-q", "-m", "tool")
    git(repo, "config", "core.fileMode", "false")
    (repo / "tool.sh").chmod(0o644)
    write(repo, "tool.sh", "#!/bin/sh\necho changed\n")
    write(repo, "new.sh", "#!/bin/sh\n", mode=0o755)
    assert_same_trees(repo)


def test_intent_to_add_and_staged_then_edited(repo: Path) -> None:
    write(repo, "later.txt", "intent")
    git(repo, "add", "--intent-to-add", "later.txt")
    write(repo, "README.md", "staged\n")
    git(repo, "add", "README.md")
    write(repo, "README.md", "edited after staging\n")
    git(repo, "rm", "-q", "--cached", "src/app.py")
    assert_same_trees(repo)


def test_conflicted_merge(repo: Path) -> None:
    make_conflict(repo, theirs_only={"theirs-only.txt": "t\n"})
    fast, reference = both_ways(repo)
    assert fast[0] is None and reference[0] is None
    assert fast == reference


def test_submodule_changes_fall_back_to_the_index(repo: Path, tmp_path: Path) -> None:
    upstream = make_repo(tmp_path / "upstream", files={"lib.c": "1\n"})
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream), "lib")
    git(repo, "commit", "-q", "-m", "submodule")
    write(repo / "lib", "lib.c", "2\n")
    git(repo / "lib", "commit", "-q", "-am", "moved")
    assert_same_trees(repo)
    moved = git(repo / "lib", "rev-parse", "HEAD").strip()
    commit = save_api(repo).commit
    assert commit is not None
    assert git(repo, "ls-tree", commit, "lib").split()[2] == moved


def test_a_file_vanishing_while_hashed_falls_back(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, "src/app.py", "changed\n")
    write(repo, "doomed.txt", "about to vanish")
    real = treebuild.hash_worktree

    def vanish_first(*args: Any, **kwargs: Any) -> Any:
        paths = args[3]
        assert b"doomed.txt" in paths
        os.unlink(repo / "doomed.txt")
        return real(*args, **kwargs)

    monkeypatch.setattr(preparing, "hash_worktree", vanish_first)
    files = snapshot_files(repo, save_api(repo, ticket="a").commit)
    assert "doomed.txt" not in files and files["src/app.py"] == b"changed\n"

    write(repo, "doomed.txt", "again")
    calls = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        raise GitError(["hash-object"], 128, "fatal: could not open 'doomed.txt'")

    monkeypatch.setattr(preparing, "hash_worktree", failing)
    (repo / "doomed.txt").unlink()
    files = snapshot_files(repo, save_api(repo, ticket="b").commit)
    assert calls == [1]
    assert "doomed.txt" not in files and files["src/app.py"] == b"changed\n"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"plain name", b"plain name"),
        (b"back\\slash", b"back\\slash"),
        (b'"quoted', b'"\\"quoted"'),
        (b"new\nline", b'"new\\012line"'),
        (b"tab\there", b'"tab\\011here"'),
        ("ünï".encode(), "ünï".encode()),
    ],
)
def test_quote(raw: bytes, expected: bytes) -> None:
    assert quote(raw) == expected


def test_quoted_names_round_trip_through_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "names", files={})
    names = ['"starts with a quote', "new\nline", "tab\tin it", "back\\slash", "cr\rin it"]
    for name in names:
        write(repo, name, name)
    fast, reference = both_ways(repo)
    assert fast == reference
    files = snapshot_files(repo, save_api(repo).commit)
    assert {name: files[name] for name in names} == {n: n.encode() for n in names}
