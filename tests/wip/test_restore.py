"""`cairn wip restore`: into a new directory, in place (with a safety snapshot), refusals, names.

Every test drives real git in a temporary repository. The in-place tests check that the restore
never writes the real index, never moves HEAD or a branch, never rewrites an unchanged file,
refuses (touching nothing) before it would overwrite a path no snapshot can hold, and that
restoring the safety snapshot it records undoes it byte for byte.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cairn import wip
from helpers import (
    assert_error,
    assert_one_line_error,
    cairn,
    fingerprint,
    git,
    make_repo,
    save,
    snapshot_files,
    tree_state,
    without_worktree,
    write,
)

CAP_TOML = "[snapshot]\nmax_new_file_bytes = 1000\n"


def restore_json(repo: Path, *args: str) -> dict[str, Any]:
    result = cairn("wip", "restore", "--json", *args, cwd=repo)
    assert result.returncode == 0, (result.stdout, result.stderr)
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def wip_refs(repo: Path) -> str:
    """Every snapshot ref and the commit it names: a new snapshot anywhere changes this."""
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/cairn/")


# --- --to: materialise in a new directory ------------------------------------------------------


def build_awkward_tree(repo: Path) -> None:
    """A work tree with every kind of change a snapshot must carry (and some it must not)."""
    os.symlink("README.md", repo / "tracked_link")
    git(repo, "add", "tracked_link")
    git(repo, "commit", "-q", "-m", "add a symlink")
    write(repo, "cairn.toml", CAP_TOML)  # untracked, and itself part of the snapshot
    write(repo, "src/app.py", "print('changed')\n")
    (repo / "to_delete.txt").unlink()  # deletion of a tracked file
    write(repo, "staged.txt", "v2\n")
    git(repo, "add", "staged.txt")  # staged-only change: index == work tree != HEAD
    write(repo, "both.txt", "v2\n")
    git(repo, "add", "both.txt")
    write(repo, "both.txt", "v3\n")  # staged, then changed again
    (repo / "tool.sh").chmod(0o755)  # tracked file: mode change only
    write(repo, "run.sh", "#!/bin/sh\necho run\n", mode=0o755)  # untracked executable
    git(repo, "rm", "-q", "--cached", "uncached.txt")  # staged deletion; the file stays
    write(repo, "data/tracked_big.bin", b"u" * 3000)  # tracked: the cap does not apply
    write(repo, "big.bin", b"B" * 5000)  # untracked over the cap: skipped and reported
    write(repo, "debug.log", "ignored\n")
    write(repo, "build/out.o", b"\x7fELF")
    os.unlink(repo / "tracked_link")
    os.symlink("src/app.py", repo / "tracked_link")  # retargeted tracked symlink
    os.symlink("README.md", repo / "link to readme")
    os.symlink("nowhere/at all", repo / "dangling")
    os.symlink("src", repo / "srclink")  # a symlink to a directory
    write(repo, "dir with space/inner file.txt", "spaces\n")
    write(repo, "new\nline.txt", "newline in the name\n")
    write(repo, "ünïcødé/ファイル.txt", "non-ascii\n")
    write(repo, "-dash", "leading dash\n")
    write(repo, "empty", "")
    write(repo, "bin.dat", bytes(range(256)))


AWKWARD_FILES = {
    "README.md": "hello\n",
    "src/app.py": "print('app')\n",
    "to_delete.txt": "bye\n",
    "staged.txt": "v1\n",
    "both.txt": "v1\n",
    "tool.sh": "#!/bin/sh\necho tool\n",
    "uncached.txt": "kept on disk\n",
    "data/tracked_big.bin": "t" * 3000,
    ".gitignore": "*.log\nbuild/\n",
}
IGNORED_OR_OVER_CAP = {"debug.log", "build", "big.bin"}


def test_to_new_dir_reproduces_the_work_tree_and_leaves_it_alone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", AWKWARD_FILES)
    build_awkward_tree(repo)
    expected = tree_state(repo, skip=IGNORED_OR_OVER_CAP)
    saved = cairn("wip", "save", "-t", "inv2", "--json", cwd=repo)
    assert saved.returncode == 0, saved.stderr
    skipped = json.loads(saved.stdout)["skipped"]
    assert [(s["path"], s["reason"]) for s in skipped] == [("big.bin", "too_large")]
    before = fingerprint(repo)

    out = tmp_path / "restored"
    report = restore_json(repo, "inv2", "--to", str(out))

    assert tree_state(out) == expected
    assert fingerprint(repo) == before
    assert report["to"] == str(out)
    assert report["safety_commit"] is None
    assert [(s["path"], s["reason"]) for s in report["skipped_in_snapshot"]] == [
        ("big.bin", "too_large")
    ]
    assert {"new\nline.txt", "ünïcødé/ファイル.txt", "-dash", "dangling"} <= set(report["written"])
    # spot checks, so that a broken tree_state could not hide a difference
    assert os.readlink(out / "dangling") == "nowhere/at all"
    assert os.readlink(out / "tracked_link") == "src/app.py"
    assert os.access(out / "run.sh", os.X_OK) and os.access(out / "tool.sh", os.X_OK)
    assert (out / "both.txt").read_text() == "v3\n"
    assert (out / "uncached.txt").read_text() == "kept on disk\n"
    assert not (out / "to_delete.txt").exists()
    assert not (out / "big.bin").exists() and not (out / "debug.log").exists()


def test_to_dry_run_creates_nothing(repo: Path, tmp_path: Path) -> None:
    write(repo, "new.txt", "new\n")
    save(repo, "t")
    out = tmp_path / "never"
    report = restore_json(repo, "t", "--to", str(out), "--dry-run")
    assert report["dry_run"] is True
    assert "new.txt" in report["written"]
    assert not out.exists()


def test_to_existing_non_empty_dir_is_refused(repo: Path, tmp_path: Path) -> None:
    write(repo, "new.txt", "new\n")
    save(repo, "t")
    out = tmp_path / "occupied"
    write(out, "precious.txt", "mine\n")
    before = tree_state(out)
    repo_before = fingerprint(repo)

    result = cairn("wip", "restore", "t", "--to", str(out), cwd=repo)

    assert_one_line_error(result, 2)
    assert "not empty" in result.stderr
    assert tree_state(out) == before
    assert fingerprint(repo) == repo_before


def test_to_existing_empty_dir_is_accepted(repo: Path, tmp_path: Path) -> None:
    write(repo, "new.txt", "new\n")
    save(repo, "t")
    out = tmp_path / "empty"
    out.mkdir()
    restore_json(repo, "t", "--to", str(out))
    assert tree_state(out) == tree_state(repo)


@pytest.mark.parametrize("how", ["plain", "dotdot", "symlink", "toplevel"])
def test_to_inside_the_work_tree_is_refused(repo: Path, tmp_path: Path, how: str) -> None:
    write(repo, "new.txt", "new\n")
    save(repo, "t")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(repo, tmp_path / "repo-link")
    target = {
        "plain": repo / "restored",
        "dotdot": tmp_path / "elsewhere" / ".." / "repo" / "restored",
        "symlink": tmp_path / "repo-link" / "restored",
        "toplevel": repo / "src" / "..",
    }[how]
    before = fingerprint(repo)

    result = cairn("wip", "restore", "t", "--to", str(target), cwd=repo)

    assert_one_line_error(result, 2)
    assert fingerprint(repo) == before
    assert not (repo / "restored").exists()


# --- in place ----------------------------------------------------------------------------------


def test_in_place_restore_and_undo(tmp_path: Path) -> None:
    files = {
        "README.md": "hello\n",
        "src/app.py": "print('app')\n",
        "keep.txt": "never changes\n",
        "conf": "conf v1\n",
        "link_me.txt": "a file for now\n",
        "gone.txt": "deleted after S1\n",
        ".gitignore": "*.log\n",
    }
    repo = make_repo(tmp_path / "repo", files)
    write(repo, "trace.log", "ignored v1\n")
    write(repo, "cairn.toml", CAP_TOML)
    write(repo, "huge.bin", b"H" * 5000)  # over the cap at S1 and later: never touched
    # the state at S1
    write(repo, "src/app.py", "print('S1')\n")
    write(repo, "README.md", "staged at S1\n")
    git(repo, "add", "README.md")
    write(repo, "notes.md", "untracked at S1\n")
    os.symlink("keep.txt", repo / "ln")
    os.symlink("missing target", repo / "dangling")
    write(repo, "run.sh", "#!/bin/sh\n", mode=0o755)
    write(repo, "dir with space/ü ñ.txt", "names\n")
    s1 = save(repo, "T1")
    at_s1 = tree_state(repo, skip={"trace.log", "huge.bin"})
    assert snapshot_files(repo, s1)["src/app.py"] == b"print('S1')\n"

    # more work after S1
    write(repo, "src/app.py", "print('after')\n")
    (repo / "gone.txt").unlink()
    (repo / "notes.md").unlink()
    write(repo, "scratch/new.txt", "created after S1\n")
    (repo / "link_me.txt").unlink()
    os.symlink("keep.txt", repo / "link_me.txt")  # a file became a symlink
    (repo / "conf").unlink()
    write(repo, "conf/inner.txt", "a file became a directory\n")
    (repo / "ln").unlink()
    write(repo, "ln", "a symlink became a file\n")
    (repo / "run.sh").chmod(0o644)
    (repo / "dangling").unlink()
    write(repo, "trace.log", "ignored v2\n")
    pre_restore = tree_state(repo)
    prints = fingerprint(repo)
    keep_stat = os.stat(repo / "keep.txt")
    head = git(repo, "rev-parse", "HEAD")

    report = restore_json(repo, "T1")

    assert tree_state(repo, skip={"trace.log", "huge.bin"}) == at_s1
    assert (repo / "trace.log").read_text() == "ignored v2\n"  # ignored: left alone
    assert (repo / "huge.bin").read_bytes() == b"H" * 5000  # over the cap: left alone
    assert not (repo / "scratch").exists()  # emptied directories go too
    assert without_worktree(fingerprint(repo)) == without_worktree(prints)
    assert git(repo, "rev-parse", "HEAD") == head
    after = os.stat(repo / "keep.txt")
    assert (after.st_ino, after.st_mtime_ns) == (keep_stat.st_ino, keep_stat.st_mtime_ns)
    assert "keep.txt" not in report["written"]
    assert {"src/app.py", "conf", "link_me.txt", "ln", "notes.md"} <= set(report["written"])
    assert {"scratch/new.txt", "conf/inner.txt"} <= set(report["deleted"])
    assert report["obstacles"] == [] and report["commit"] == s1

    safety = report["safety_commit"]
    assert safety and safety != s1
    listed = cairn("wip", "list", "--json", cwd=repo)
    assert listed.returncode == 0, listed.stderr
    assert safety in {item["commit"] for item in json.loads(listed.stdout)}
    assert snapshot_files(repo, safety)["scratch/new.txt"] == b"created after S1\n"

    undo = restore_json(repo, safety)

    assert tree_state(repo) == pre_restore
    assert undo["commit"] == safety
    assert without_worktree(fingerprint(repo)) == without_worktree(prints)


def test_restore_of_the_current_state_writes_nothing(repo: Path) -> None:
    write(repo, "src/app.py", "print('edit')\n")
    write(repo, "new.txt", "new\n")
    save(repo, "t")
    stats = {p: os.stat(repo / p).st_mtime_ns for p in ("src/app.py", "new.txt", "README.md")}
    result = wip.restore(repo, "t")
    assert result.written == [] and result.deleted == []
    assert {p: os.stat(repo / p).st_mtime_ns for p in stats} == stats


def test_safety_snapshot_goes_to_the_ticket_asked_for(repo: Path) -> None:
    write(repo, "work.txt", "saved\n")
    save(repo, "T")
    write(repo, "work.txt", "unsaved\n")

    report = restore_json(repo, "T", "--ticket", "safe")

    assert git(repo, "rev-parse", "refs/cairn/wip/safe").strip() == report["safety_commit"]
    assert snapshot_files(repo, "refs/cairn/wip/safe")["work.txt"] == b"unsaved\n"
    assert (repo / "work.txt").read_text() == "saved\n"


# --- refusals: paths the safety snapshot could not hold ---------------------------------------


def _ignored_case(repo: Path) -> str:
    write(repo, "out.log", "saved output\n")
    save(repo, "T")
    with open(repo / ".git" / "info" / "exclude", "a") as handle:
        handle.write("*.log\n")
    write(repo, "out.log", "precious, ignored now\n")
    return "out.log"


def _over_cap_case(repo: Path) -> str:
    write(repo, "cairn.toml", CAP_TOML)
    write(repo, "data.bin", b"d" * 500)
    save(repo, "T")
    write(repo, "data.bin", b"D" * 2000)
    return "data.bin"


def _nested_repo_case(repo: Path) -> str:
    write(repo, "vendor/lib.txt", "saved vendor file\n")
    save(repo, "T")
    git(repo / "vendor", "init", "-q")
    write(repo, "vendor/lib.txt", "work inside the nested repository\n")
    return "vendor/lib.txt"


@pytest.mark.parametrize(
    "setup",
    [_ignored_case, _over_cap_case, _nested_repo_case],
    ids=["ignored", "over-cap", "nested"],
)
def test_refuses_to_overwrite_what_no_snapshot_holds(
    tmp_path: Path, setup: Callable[[Path], str]
) -> None:
    repo = make_repo(tmp_path / "repo")
    path = setup(repo)
    saved = snapshot_files(repo, "refs/cairn/wip/T")[path]
    write(repo, "src/app.py", "print('unrelated edit')\n")
    prints = fingerprint(repo)
    refs = wip_refs(repo)

    result = cairn("wip", "restore", "T", "--json", cwd=repo)

    error = assert_error(result, 1)
    assert path in error and "--force" in error
    assert fingerprint(repo) == prints  # nothing touched ...
    assert wip_refs(repo) == refs  # ... and no safety snapshot recorded

    forced = restore_json(repo, "T", "--force")

    assert path in forced["obstacles"]
    assert forced["safety_commit"]
    assert (repo / path).read_bytes() == saved
    assert (repo / "src/app.py").read_text() == "print('app')\n"
    if setup is _nested_repo_case:  # --force overwrites the file, never the nested repository
        assert (repo / "vendor/.git/HEAD").is_file()


# --- dry run -----------------------------------------------------------------------------------


def test_dry_run_reports_the_plan_and_changes_nothing(repo: Path) -> None:
    write(repo, "src/app.py", "print('S')\n")
    write(repo, "notes.md", "notes\n")
    save(repo, "T")
    write(repo, "src/app.py", "print('later')\n")
    write(repo, "later.txt", "later\n")
    (repo / "notes.md").unlink()
    prints = fingerprint(repo)
    refs = wip_refs(repo)

    report = restore_json(repo, "T", "--dry-run")

    assert report["dry_run"] is True and report["safety_commit"] is None
    assert sorted(report["written"]) == ["notes.md", "src/app.py"]
    assert report["deleted"] == ["later.txt"]
    assert report["obstacles"] == []
    assert fingerprint(repo) == prints
    assert wip_refs(repo) == refs

    human = cairn("wip", "restore", "T", "--dry-run", cwd=repo)
    assert human.returncode == 0, human.stderr
    assert "would restore" in human.stdout and "delete later.txt" in human.stdout
    assert fingerprint(repo) == prints and wip_refs(repo) == refs


def test_dry_run_reports_obstacles_instead_of_refusing(repo: Path) -> None:
    path = _ignored_case(repo)
    prints = fingerprint(repo)
    refs = wip_refs(repo)

    report = restore_json(repo, "T", "--dry-run")

    assert report["obstacles"] == [path]
    assert path in report["written"]
    assert any("--force" in w for w in report["warnings"])
    assert fingerprint(repo) == prints and wip_refs(repo) == refs


# --- naming the snapshot -----------------------------------------------------------------------


def test_restore_by_ticket_by_ancestor_and_by_commit(repo: Path, tmp_path: Path) -> None:
    write(repo, "work.txt", "first\n")
    first = save(repo, "T")
    state1 = tree_state(repo)
    write(repo, "work.txt", "second\n")
    write(repo, "more.txt", "more\n")
    second = save(repo, "T")
    state2 = tree_state(repo)

    for spec, commit, state in [
        ("T", second, state2),
        ("T~1", first, state1),
        (first, first, state1),
        (second[:12], second, state2),
    ]:
        out = tmp_path / f"out-{spec.replace('~', '_')}"
        report = restore_json(repo, spec, "--to", str(out))
        assert report["commit"] == commit, spec
        assert tree_state(out) == state, spec

    write(repo, "work.txt", "third\n")
    report = restore_json(repo, "T~1")
    assert report["commit"] == first
    assert tree_state(repo) == state1


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no-such-ticket", "no snapshot"),
        ("T~7", "no snapshot"),
        ("0123456789abcdef0123456789abcdef01234567", "no snapshot"),
        ("-rf", "not a snapshot name"),
        ("HEAD", "not a cairn snapshot"),
        ("main", "not a cairn snapshot"),
    ],
)
def test_bad_names_are_refused(repo: Path, spec: str, says: str) -> None:
    write(repo, "work.txt", "w\n")
    save(repo, "T")
    write(repo, "work.txt", "changed since\n")
    prints = fingerprint(repo)
    refs = wip_refs(repo)

    result = cairn("wip", "restore", "--", spec, cwd=repo)

    assert_one_line_error(result, 2)
    assert says in result.stderr
    assert fingerprint(repo) == prints and wip_refs(repo) == refs


# --- independence from HEAD --------------------------------------------------------------------


def test_restore_after_a_new_commit_warns_and_keeps_head(repo: Path) -> None:
    write(repo, "src/app.py", "print('wip')\n")
    write(repo, "feature.py", "x = 1\n")
    snap = save(repo, "T")
    at_snap = tree_state(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the user commits")
    write(repo, "feature.py", "x = 2\n")
    write(repo, "README.md", "rewritten\n")
    head = git(repo, "rev-parse", "HEAD")
    branches = git(repo, "for-each-ref", "refs/heads")
    index = (repo / ".git" / "index").read_bytes()

    result = wip.restore(repo, "T")

    assert result.commit == snap
    assert any("HEAD" in w for w in result.warnings), result.warnings
    assert tree_state(repo) == at_snap
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "for-each-ref", "refs/heads") == branches
    assert (repo / ".git" / "index").read_bytes() == index
    assert git(repo, "status", "--porcelain") == ""  # the snapshot's files are HEAD's now
