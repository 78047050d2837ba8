"""`cairn wip save`: what it captures, what it never touches, and the awkward repository states."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cairn import wip
from cairn.wip import preparing
from cairn.wip import scan as scan_module
from helpers import (
    assert_one_line_error,
    cairn,
    fingerprint,
    git,
    make_conflict,
    make_repo,
    slow_clean_filter,
    snapshot_files,
    tree_state,
    write,
)


def parents(repo: Path, commit: str | None) -> list[str]:
    assert commit is not None, "no snapshot commit"
    return git(repo, "rev-list", "--parents", "-n1", commit).split()[1:]


def save_json(repo: Path, *args: str) -> dict[str, Any]:
    result = cairn("wip", "save", "--json", *args, cwd=repo)
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


# --- what is captured -------------------------------------------------------------------------


def test_captures_tracked_staged_untracked_and_deletions(repo: Path) -> None:
    write(repo, "src/app.py", "print('changed')\n")
    write(repo, "staged.txt", "staged\n")
    git(repo, "add", "staged.txt")
    write(repo, "notes/new file.md", "brand new\n")
    (repo / "README.md").unlink()

    out = save_json(repo, "--reason", "turn cap")

    assert set(out) >= {
        "ref",
        "commit",
        "created",
        "base",
        "branch",
        "files_changed",
        "skipped",
        "elapsed_ms",
    }
    assert out["ref"] == "refs/cairn/wip/main"
    assert out["created"] is True
    assert out["branch"] == "main"
    assert out["base"] == git(repo, "rev-parse", "HEAD").strip()
    assert out["files_changed"] == 4
    assert out["skipped"] == []
    files = snapshot_files(repo, out["commit"])
    assert files["src/app.py"] == b"print('changed')\n"
    assert files["staged.txt"] == b"staged\n"
    assert files["notes/new file.md"] == b"brand new\n"
    assert "README.md" not in files
    assert git(repo, "rev-parse", "refs/cairn/wip/main").strip() == out["commit"]


def test_symlinks_exec_bits_renames_and_awkward_names(repo: Path) -> None:
    write(repo, "run.sh", "#!/bin/sh\n", mode=0o755)
    os.symlink("src/app.py", repo / "link")
    os.symlink("does/not/exist", repo / "dangling")
    git(repo, "mv", "src/app.py", "src/main.py")
    write(repo, "with space.txt", "s\n")
    write(repo, "new\nline.txt", "n\n")
    write(repo, "ünïcødé/日本.txt", "u\n")

    commit = wip.save(repo).commit
    assert commit

    listing = git(repo, "ls-tree", "-r", "-z", commit).split("\0")
    modes = {entry.split("\t", 1)[1]: entry.split()[0] for entry in listing if entry}
    assert modes["run.sh"] == "100755"
    assert modes["link"] == "120000"
    assert modes["dangling"] == "120000"
    assert "src/app.py" not in modes and modes["src/main.py"] == "100644"
    files = snapshot_files(repo, commit)
    assert files["link"] == b"src/app.py"
    assert files["dangling"] == b"does/not/exist"
    assert files["with space.txt"] == b"s\n"
    assert files["new\nline.txt"] == b"n\n"
    assert files["ünïcødé/日本.txt"] == b"u\n"


def test_ignored_files_are_not_captured(repo: Path) -> None:
    write(repo, ".gitignore", "build/\n*.log\n")
    write(repo, "build/out.o", "obj")
    write(repo, "debug.log", "log")
    write(repo, "kept.txt", "kept")
    files = snapshot_files(repo, wip.save(repo).commit)
    assert "kept.txt" in files and ".gitignore" in files
    assert not any(p.startswith("build/") or p.endswith(".log") for p in files)


def test_staged_state_is_a_parent_and_head_is_reachable(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    write(repo, "src/app.py", "staged version\n")
    git(repo, "add", "src/app.py")
    write(repo, "src/app.py", "work tree version\n")

    result = wip.save(repo)
    snap_parents = parents(repo, result.commit)
    assert snap_parents[0] == head  # first snapshot: no previous one
    index_commit = snap_parents[1]
    assert git(repo, "show", f"{index_commit}:src/app.py") == "staged version\n"
    assert git(repo, "show", f"{result.commit}:src/app.py") == "work tree version\n"

    # gc cannot take any of it: everything is reachable from the ref.
    git(repo, "gc", "-q", "--prune=now")
    git(repo, "fsck", "--no-dangling")
    assert git(repo, "show", f"{index_commit}:src/app.py") == "staged version\n"


# --- the chain, dedupe, clean trees ------------------------------------------------------------


def test_snapshots_form_a_first_parent_chain(repo: Path) -> None:
    commits = []
    for i in range(3):
        write(repo, "progress.txt", f"step {i}\n")
        commits.append(wip.save(repo, reason=f"step {i}").commit)
    chain = git(repo, "log", "--first-parent", "--format=%H", "-n3", "refs/cairn/wip/main").split()
    assert chain == commits[::-1]
    assert parents(repo, commits[2])[0] == commits[1]
    assert parents(repo, commits[1])[0] == commits[0]
    # the HEAD of the moment is a parent of every snapshot
    head = git(repo, "rev-parse", "HEAD").strip()
    assert all(head in parents(repo, c) for c in commits)
    # the ref has a reflog, a second safety net
    assert len(git(repo, "reflog", "show", "--format=%H", "refs/cairn/wip/main").split()) == 3


def test_unchanged_tree_makes_no_new_commit(repo: Path) -> None:
    write(repo, "a.txt", "a")
    first = wip.save(repo)
    again = wip.save(repo)
    assert again.created is False
    assert again.commit == first.commit
    assert "nothing changed" in again.summary
    # a change to the staged state alone is a change
    git(repo, "add", "a.txt")
    staged = wip.save(repo)
    assert staged.created is True
    assert parents(repo, staged.commit)[0] == first.commit


def test_clean_tree_without_snapshot_is_a_noop(repo: Path) -> None:
    result = cairn("wip", "save", cwd=repo)
    assert result.returncode == 0
    assert "nothing to save" in result.stdout
    assert git(repo, "for-each-ref", "refs/cairn") == ""
    out = save_json(repo)
    assert out["created"] is False and out["commit"] is None


def test_committing_the_work_is_recorded_as_a_new_snapshot(repo: Path) -> None:
    write(repo, "feature.py", "x = 1\n")
    first = wip.save(repo)
    git(repo, "add", "feature.py")
    git(repo, "commit", "-q", "-m", "feature")
    after = wip.save(repo, reason="after commit")
    assert after.created
    assert after.files_changed == 0
    assert parents(repo, after.commit)[0] == first.commit
    assert after.base == git(repo, "rev-parse", "HEAD").strip()


# --- never touches the user's state (Invariant 1) ---------------------------------------------


def _dirty(repo: Path) -> None:
    write(repo, "src/app.py", "edited\n")
    write(repo, "staged.py", "s\n")
    git(repo, "add", "staged.py")
    write(repo, "untracked/deep/file.txt", "u\n")
    os.symlink("staged.py", repo / "alias")


def _conflict(repo: Path) -> None:
    make_conflict(repo)


def _split_index(repo: Path) -> None:
    git(repo, "update-index", "--split-index")
    write(repo, "src/app.py", "split\n")
    write(repo, "new.txt", "n\n")


def _index_locked(repo: Path) -> None:
    write(repo, "src/app.py", "locked\n")
    write(repo, ".git/index.lock", "held by someone else")


def _hooks(repo: Path) -> None:
    for hook in ("post-index-change", "reference-transaction", "post-commit", "pre-commit"):
        write(repo, f".git/hooks/{hook}", f"#!/bin/sh\ntouch '{repo}/.git/FIRED-{hook}'\n", 0o755)
    write(repo, "src/app.py", "hooked\n")


def _signing_and_no_identity(repo: Path) -> None:
    git(repo, "config", "commit.gpgSign", "true")
    git(repo, "config", "gpg.program", "false")
    git(repo, "config", "user.useConfigOnly", "true")
    git(repo, "config", "--unset-all", "user.email", check=False)
    write(repo, "src/app.py", "signed?\n")


SCENARIOS = {
    "dirty": _dirty,
    "conflict": _conflict,
    "split-index": _split_index,
    "index-lock": _index_locked,
    "hooks": _hooks,
    "gpgsign-no-email": _signing_and_no_identity,
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_save_changes_nothing_the_user_owns(repo: Path, name: str) -> None:
    SCENARIOS[name](repo)
    before = fingerprint(repo)
    shared_before = sorted(p.name for p in (repo / ".git").glob("sharedindex.*"))

    result = cairn("wip", "save", "--json", cwd=repo)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["created"] is True
    assert fingerprint(repo) == before
    assert sorted(p.name for p in (repo / ".git").glob("sharedindex.*")) == shared_before
    assert not list((repo / ".git").glob("FIRED-*")), "a hook fired"


def test_hooks_path_config_is_not_used_either(repo: Path) -> None:
    hooks = repo.parent / "myhooks"
    for hook in ("post-index-change", "reference-transaction"):
        write(hooks, hook, f"#!/bin/sh\ntouch '{repo.parent}/FIRED-{hook}'\n", 0o755)
    git(repo, "config", "core.hooksPath", str(hooks))
    write(repo, "x", "x")
    assert wip.save(repo).created
    assert not list(repo.parent.glob("FIRED-*"))


def test_conflicted_paths_are_recorded_with_their_markers(repo: Path) -> None:
    _conflict(repo)
    out = save_json(repo)
    assert out["conflicted"] == ["src/app.py"]
    content = snapshot_files(repo, out["commit"])["src/app.py"]
    assert b"<<<<<<<" in content and b"ours" in content and b"theirs" in content
    message = git(repo, "log", "-1", "--format=%B", out["commit"])
    assert "Cairn-Index-Tree: conflicted" in message
    assert 'Cairn-Conflicted-Path: "src/app.py"' in message
    assert git(repo, "ls-files", "-u")  # the real index is still unmerged


def test_index_lock_is_left_in_place(repo: Path) -> None:
    _index_locked(repo)
    assert wip.save(repo).created
    assert (repo / ".git/index.lock").read_text() == "held by someone else"


def test_inherited_git_environment_is_ignored(repo: Path, tmp_path: Path) -> None:
    other = make_repo(tmp_path / "other")
    write(repo, "mine.txt", "mine")
    env = {
        "GIT_DIR": str(other / ".git"),
        "GIT_WORK_TREE": str(other),
        "GIT_INDEX_FILE": str(tmp_path / "bogus-index"),
        "GIT_OBJECT_DIRECTORY": str(tmp_path / "bogus-objects"),
    }
    result = cairn("wip", "save", "--json", cwd=repo, env=env)
    assert result.returncode == 0, result.stderr
    commit = json.loads(result.stdout)["commit"]
    assert "mine.txt" in snapshot_files(repo, commit)
    assert git(other, "for-each-ref", "refs/cairn") == ""
    assert not (tmp_path / "bogus-index").exists()


# --- HEAD states, worktrees, subdirectories ----------------------------------------------------


def test_no_commits_yet(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "fresh", files={})
    assert cairn("wip", "save", cwd=repo).stdout.startswith("nothing to save")
    write(repo, "first.py", "1")
    write(repo, "staged.py", "2")
    git(repo, "add", "staged.py")
    out = save_json(repo)
    assert out["ref"] == "refs/cairn/wip/default"
    assert out["base"] is None
    files = snapshot_files(repo, out["commit"])
    assert set(files) == {"first.py", "staged.py"}
    index_commit = parents(repo, out["commit"])[0]
    assert git(repo, "ls-tree", "--name-only", index_commit).split() == ["staged.py"]
    assert git(repo, "rev-parse", "-q", "--verify", "HEAD", check=False) == ""


def test_detached_head_uses_default_ticket(repo: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    write(repo, "x", "x")
    result = wip.save(repo)
    assert result.ref == "refs/cairn/wip/default"
    assert result.branch is None


def test_branch_name_is_mapped_to_ticket(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature/login+v2")
    write(repo, "x", "x")
    assert wip.save(repo).ref == "refs/cairn/wip/feature-login-v2"


def test_linked_worktree(repo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    write(linked, "side.txt", "from the linked worktree")
    write(repo, "main.txt", "from the main worktree")
    before_main = fingerprint(repo)
    before_linked = fingerprint(linked)

    side = wip.save(linked)
    assert side.ref == "refs/cairn/wip/side"
    files = snapshot_files(repo, side.commit)
    assert "side.txt" in files and "main.txt" not in files
    # refs are shared by all worktrees of the clone
    assert git(repo, "rev-parse", "refs/cairn/wip/side").strip() == side.commit
    assert fingerprint(repo) == before_main
    assert fingerprint(linked) == before_linked


def test_from_a_subdirectory(repo: Path) -> None:
    write(repo, "top.txt", "top")
    write(repo, "src/deep.txt", "deep")
    result = cairn("wip", "save", "--json", "-C", str(repo / "src"))
    files = snapshot_files(repo, json.loads(result.stdout)["commit"])
    assert {"top.txt", "src/deep.txt"} <= set(files)


def test_nested_workspace_is_not_confused_with_outer_repo(repo: Path) -> None:
    inner = make_repo(repo / "vendor" / "inner", files={"lib.c": "int x;\n"})
    write(inner, "lib.c", "int y;\n")
    write(repo, "outer.txt", "outer")

    inner_save = wip.save(inner)
    assert inner_save.created
    assert set(snapshot_files(inner, inner_save.commit)) == {"lib.c"}
    assert git(repo, "for-each-ref", "refs/cairn") == ""

    outer_save = save_json(repo)
    assert {"path": "vendor/inner/", "reason": "nested_repo", "bytes": None, "files": None} in (
        outer_save["skipped"]
    )
    files = snapshot_files(repo, outer_save["commit"])
    assert "outer.txt" in files
    assert not any(p.startswith("vendor/") for p in files)


# --- caps and budgets --------------------------------------------------------------------------


def test_oversized_untracked_files_are_skipped_and_named(repo: Path) -> None:
    write(repo, "cairn.toml", '[snapshot]\nmax_new_file_bytes = "1KiB"\n')
    write(repo, "big.bin", b"\0" * 2048)
    write(repo, "small.txt", "s")
    git(repo, "add", "cairn.toml")
    git(repo, "commit", "-q", "-m", "config")
    write(repo, "README.md", "x" * 4096)  # tracked files are never capped
    out = save_json(repo)
    assert out["skipped"] == [
        {"path": "big.bin", "reason": "too_large", "bytes": 2048, "files": None}
    ]
    files = snapshot_files(repo, out["commit"])
    assert "big.bin" not in files and "small.txt" in files
    assert len(files["README.md"]) == 4096
    human = cairn("wip", "save", "--ticket", "other", cwd=repo)
    assert "big.bin" in human.stdout and "size cap" in human.stdout


def test_an_oversized_file_whose_name_is_not_utf8_is_named_and_the_rest_saved(repo: Path) -> None:
    """Found by snapshot_fuzz: the skipped name's lone surrogates made every save fail."""
    write(repo, "cairn.toml", '[snapshot]\nmax_new_file_bytes = "1KiB"\n')
    git(repo, "add", "cairn.toml")
    git(repo, "commit", "-q", "-m", "config")
    (repo / os.fsdecode(b"big-\xff\xfe.bin")).write_bytes(b"\0" * 2048)
    write(repo, "small.txt", "s")
    name = os.fsdecode(b"big-\xff\xfe.bin")
    out = save_json(repo)
    assert out["skipped"] == [{"path": name, "reason": "too_large", "bytes": 2048, "files": None}]
    assert "small.txt" in snapshot_files(repo, out["commit"])
    listed = json.loads(cairn("wip", "show", out["commit"], "--json", cwd=repo).stdout)
    assert name in json.dumps(listed, ensure_ascii=False)


def test_budget_drops_generated_directories_first(repo: Path) -> None:
    write(repo, "cairn.toml", "[snapshot]\nmax_new_files = 50\n")
    for i in range(5):
        write(repo, f"app/src/mod{i}.ts", f"export const x{i} = {i};\n")
    for i in range(200):
        write(repo, f"app/node_modules/pkg{i % 20}/f{i}.js", "module.exports = 1;\n")
    result = wip.save(repo)
    dropped = [s for s in result.skipped if s.reason == "over_budget"]
    assert [(s.path, s.files) for s in dropped] == [("app/node_modules/", 200)]
    files = snapshot_files(repo, result.commit)
    assert all(f"app/src/mod{i}.ts" in files for i in range(5))
    assert not any("node_modules" in p for p in files)


def test_budget_drops_the_dominant_directory(repo: Path) -> None:
    write(repo, "cairn.toml", '[snapshot]\nmax_new_bytes = "20KiB"\n')
    write(repo, "notes.md", "keep me")
    for i in range(40):
        write(repo, f"gen/out/chunk{i}.dat", "z" * 1024)
    result = wip.save(repo)
    assert [s.path for s in result.skipped] == ["gen/out/"]
    files = snapshot_files(repo, result.commit)
    assert "notes.md" in files and "cairn.toml" in files


# --- racy git, vanishing files, timeouts -------------------------------------------------------


def test_same_second_same_size_edit_is_captured(repo: Path) -> None:
    # git's racy-clean check depends on the copied index keeping its mtime.
    for attempt in range(3):
        write(repo, "racy.txt", "aaaa\n")
        git(repo, "add", "racy.txt")
        write(repo, "racy.txt", "bbbb\n")
        time.sleep(1.1)
        result = wip.save(repo, ticket=f"racy{attempt}")
        assert snapshot_files(repo, result.commit)["racy.txt"] == b"bbbb\n"


def test_files_vanishing_during_the_save(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo, "gone-untracked.txt", "u")
    write(repo, "kept.txt", "k")
    write(repo, "src/app.py", "modified then deleted")
    real = scan_module.select_untracked

    def vanish_then_select(*args: Any, **kwargs: Any) -> Any:
        (repo / "gone-untracked.txt").unlink()
        (repo / "src/app.py").unlink()
        return real(*args, **kwargs)

    monkeypatch.setattr(preparing, "select_untracked", vanish_then_select)
    files = snapshot_files(repo, wip.save(repo).commit)
    assert "kept.txt" in files
    assert "gone-untracked.txt" not in files
    assert "src/app.py" not in files


def test_timeout_abandons_cleanly(repo: Path) -> None:
    write(repo, "seed.txt", "seed")
    first = wip.save(repo).commit
    slow_clean_filter(repo, 5)
    before = fingerprint(repo)

    started = time.monotonic()
    result = cairn("wip", "save", "--timeout-ms", "700", cwd=repo)
    elapsed = time.monotonic() - started

    assert_one_line_error(result, code=1)
    assert "abandoned" in result.stderr and "no ref was moved" in result.stderr
    assert elapsed < 4, "the slow filter was not killed"
    assert git(repo, "rev-parse", "refs/cairn/wip/main").strip() == first
    assert fingerprint(repo) == before
    assert list((repo / ".git/cairn/tmp").iterdir()) == []
    leftover = subprocess.run(["pgrep", "-f", "sleep 5; cat"], capture_output=True, check=False)
    assert leftover.stdout == b""


def test_cutoff_timeout_comes_from_config(repo: Path) -> None:
    write(repo, "cairn.toml", "[agent]\ncutoff_timeout_ms = 500\n")
    slow_clean_filter(repo, 5)
    assert_one_line_error(cairn("wip", "save", cwd=repo), code=1)


# --- concurrency -------------------------------------------------------------------------------


@pytest.mark.slow
def test_concurrent_saves_never_lose_a_snapshot(repo: Path, tmp_path: Path) -> None:
    count = 6
    trees = []
    for i in range(count):
        tree = tmp_path / f"wt{i}"
        git(repo, "worktree", "add", "-q", "-b", f"w{i}", str(tree))
        write(tree, f"only-in-{i}.txt", f"worktree {i}\n")
        trees.append(tree)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "cairn", "wip", "save", "--ticket", "shared", "--json"],
            cwd=tree,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for tree in trees
    ]
    commits = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
        commits.append(json.loads(out)["commit"])
    chain = git(repo, "log", "--first-parent", f"-n{count}", "--format=%H", "refs/cairn/wip/shared")
    assert sorted(chain.split()) == sorted(commits)
    for i, commit in enumerate(commits):
        assert f"only-in-{i}.txt" in snapshot_files(repo, commit)


# --- the optional branch and bad input ---------------------------------------------------------


def test_preserve_uncommitted_work_branch(repo: Path) -> None:
    write(repo, "cairn.toml", "[agent]\npreserve_uncommitted_work_branch = true\n")
    head_before = (repo / ".git/HEAD").read_text()
    main_before = git(repo, "rev-parse", "main")
    result = wip.save(repo)
    assert git(repo, "rev-parse", "cairn/wip/main").strip() == result.commit
    assert (repo / ".git/HEAD").read_text() == head_before
    assert git(repo, "rev-parse", "main") == main_before


def test_not_a_git_directory(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    result = cairn("wip", "save", cwd=plain)
    assert_one_line_error(result)
    assert "not inside a git work tree" in result.stderr
    assert list(plain.iterdir()) == []
    assert_one_line_error(cairn("wip", "save", "-C", str(tmp_path / "missing")))


def test_bare_repository_is_bad_input(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    assert_one_line_error(cairn("wip", "save", cwd=bare))


def test_hostile_run_id_is_bad_input(repo: Path) -> None:
    write(repo, "x", "x")
    before = fingerprint(repo)
    assert_one_line_error(cairn("wip", "save", "--run", "../../etc", cwd=repo))
    assert fingerprint(repo) == before
    assert git(repo, "for-each-ref", "refs/cairn") == ""


def test_saved_tree_matches_work_tree_exactly(repo: Path, tmp_path: Path) -> None:
    _dirty(repo)
    expected = tree_state(repo)
    commit = wip.save(repo).commit
    assert commit is not None
    out = tmp_path / "out"
    wip.restore(repo, commit, to=out)
    assert tree_state(out) == expected


def test_sigkill_mid_save_moves_no_ref_and_leaves_nothing_behind(repo: Path) -> None:
    write(repo, "seed.txt", "seed")
    first = wip.save(repo).commit
    slow_clean_filter(repo, 3)
    proc = subprocess.Popen([sys.executable, "-m", "cairn", "wip", "save"], cwd=repo)
    scratch = repo / ".git/cairn/tmp"
    deadline = time.monotonic() + 20
    while not (scratch.exists() and any(scratch.iterdir())):
        assert time.monotonic() < deadline, "the save never started"
        time.sleep(0.02)
    time.sleep(0.3)
    proc.kill()
    proc.wait()
    assert git(repo, "rev-parse", "refs/cairn/wip/main").strip() == first
    assert list(scratch.iterdir()), "the killed save should have left its scratch directory"

    (repo / ".gitattributes").unlink()
    (repo / "data.slow").unlink()
    write(repo, "after.txt", "after the crash")
    result = wip.save(repo)
    assert result.created and result.previous == first
    assert list(scratch.iterdir()) == []


def test_a_noop_save_writes_no_objects(repo: Path) -> None:
    write(repo, "src/app.py", "staged\n")
    git(repo, "add", "src/app.py")
    write(repo, "src/app.py", "edited\n")
    write(repo, "new.txt", "new\n")
    first = wip.save(repo)
    objects = git(repo, "count-objects")
    time.sleep(1.1)  # a commit made now would differ from any earlier one by its timestamp
    again = wip.save(repo)
    assert again.created is False and again.commit == first.commit
    assert git(repo, "count-objects") == objects
