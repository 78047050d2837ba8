"""Ticket worktrees: created beside the repository, reused, and rebuilt when stale."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cairn import config as config_module
from cairn import wip
from cairn.config.records import Config
from cairn.errors import BadInput
from cairn.fleet import workspaces
from cairn.git import Repo
from helpers import git, make_repo, rev, save, write


def open_repo(path: Path) -> tuple[Repo, Config]:
    found = Repo.discover(path)
    return found, config_module.load(found.toplevel)


def test_ensure_creates_beside_the_repo_then_reuses(repo: Path) -> None:
    found, cfg = open_repo(repo)
    assert workspaces.workspace_root(found, cfg) == repo.parent / "repo.cairn"
    ws = workspaces.ensure(found, cfg, "T-1")
    assert ws.path == repo.parent / "repo.cairn" / "T-1"
    assert (ws.branch, ws.created, ws.repaired) == ("cairn/T-1", True, False)
    assert git(ws.path, "symbolic-ref", "--short", "HEAD").strip() == "cairn/T-1"
    assert rev(ws.path, "HEAD") == rev(repo, "main")
    assert git(repo, "status", "--porcelain") == ""  # nothing shows in the main work tree
    write(ws.path, "work.txt", "in progress\n")
    again = workspaces.ensure(found, cfg, "T-1")
    assert (again.path, again.created, again.repaired) == (ws.path, False, False)
    assert (ws.path / "work.txt").read_text() == "in progress\n"
    # from inside the ticket's worktree, the same root and the same worktree
    inside, cfg2 = open_repo(ws.path)
    assert workspaces.ensure(inside, cfg2, "T-1").path == ws.path


def test_a_new_ticket_branch_starts_from_fleet_base(repo: Path) -> None:
    git(repo, "branch", "release/2")
    write(repo, "later.txt")
    git(repo, "add", "later.txt")
    git(repo, "commit", "-qm", "later on main")
    write(repo, "cairn.toml", '[fleet]\nbase = "release/2"\n')
    found, cfg = open_repo(repo)
    ws = workspaces.ensure(found, cfg, "T-3")
    assert rev(ws.path, "HEAD") == rev(repo, "release/2") != rev(repo, "main")
    write(repo, "cairn.toml", '[fleet]\nbase = "nowhere"\n')
    found, cfg = open_repo(repo)
    with pytest.raises(BadInput, match="base 'nowhere' is not a branch of"):
        workspaces.ensure(found, cfg, "T-4")


def test_an_existing_branch_is_checked_out_not_recreated(repo: Path) -> None:
    git(repo, "branch", "cairn/T-2")
    write(repo, "later.txt")
    git(repo, "add", "later.txt")
    git(repo, "commit", "-qm", "later on main")
    found, cfg = open_repo(repo)
    ws = workspaces.ensure(found, cfg, "T-2")
    assert rev(ws.path, "HEAD") == rev(repo, "cairn/T-2") != rev(repo, "main")


def test_self_repair_after_the_worktree_directory_is_deleted(repo: Path) -> None:
    found, cfg = open_repo(repo)
    ws = workspaces.ensure(found, cfg, "T-1")
    write(ws.path, "feature.py", "done = True\n")
    git(ws.path, "add", "feature.py")
    git(ws.path, "commit", "-qm", "feature")
    write(ws.path, "notes.txt", "uncommitted work\n")
    write(ws.path, "README.md", "edited, not committed\n")
    snap = save(ws.path, "T-1")
    shutil.rmtree(ws.path)
    assert "prunable" in git(repo, "worktree", "list", "--porcelain")
    rebuilt = workspaces.ensure(found, cfg, "T-1")
    assert (rebuilt.path, rebuilt.created, rebuilt.repaired) == (ws.path, True, True)
    assert rebuilt.restored == snap
    assert (ws.path / "notes.txt").read_text() == "uncommitted work\n"
    assert (ws.path / "README.md").read_text() == "edited, not committed\n"
    assert (ws.path / "feature.py").read_text() == "done = True\n"  # the branch's commit
    assert git(ws.path, "status", "--porcelain") == " M README.md\n?? notes.txt\n"
    assert "prunable" not in git(repo, "worktree", "list", "--porcelain")
    # the latest snapshot is the rebuilt state again, so a second loss rebuilds the same
    latest = wip.list_snapshots(repo, "T-1", limit=1)[0]
    assert latest.reason.startswith("worktree rebuilt from")
    shutil.rmtree(ws.path)
    workspaces.ensure(found, cfg, "T-1")
    assert (ws.path / "notes.txt").read_text() == "uncommitted work\n"


def test_a_lost_or_broken_git_file_is_written_again_every_file_kept(repo: Path) -> None:
    found, cfg = open_repo(repo)
    ws = workspaces.ensure(found, cfg, "T-1")
    write(ws.path, "stray.txt", "keep me\n")  # newer than any snapshot
    for damage in ("lost", "garbage", "binary", "another repository's"):
        dot_git = ws.path / ".git"
        if damage == "lost":
            dot_git.unlink()
        elif damage == "garbage":
            dot_git.write_text("this is not a gitdir line\n")
        elif damage == "binary":
            dot_git.write_bytes(b"\0\xff" * 100)
        else:
            dot_git.write_text(f"gitdir: {repo}/.git/worktrees/elsewhere\n")
        again = workspaces.ensure(found, cfg, "T-1")
        assert (again.path, again.created, again.repaired) == (ws.path, False, False), damage
        assert any("wrote it again" in w for w in again.warnings), again.warnings
        assert (ws.path / "stray.txt").read_text() == "keep me\n"
        assert git(ws.path, "status", "--porcelain") == "?? stray.txt\n"
        assert not [p for p in ws.path.parent.iterdir() if ".orphan-" in p.name]


def _untracked_and_snapshot(ws: Path) -> str:
    write(ws, "feature.py", "done = True\n")
    git(ws, "add", "feature.py")
    git(ws, "commit", "-qm", "feature")
    write(ws, "notes.txt", "uncommitted work\n")
    return save(ws, "T-1")


def _admin(repo: Path, ws: Path) -> Path:
    [admin] = [
        d
        for d in (repo / ".git/worktrees").iterdir()
        if (d / "gitdir").read_text().strip() == f"{ws}/.git"
    ]
    return admin


@pytest.mark.parametrize(
    "shape",
    [
        "locked initializing, zero HEAD",
        "never checked out",
        "no HEAD",
        ".git is a directory",
    ],
)
def test_a_worktree_that_is_not_a_complete_checkout_is_made_again(repo: Path, shape: str) -> None:
    """Each shape is made with real git: `git worktree add` killed before it wrote HEAD (it
    locks the worktree 'initializing' and writes a zero HEAD first), one that never checked its
    files out, one whose HEAD is gone, one where the agent ran `git init`. The worktree is moved
    aside whole (an untracked file in it kept there) and made again from the branch plus the
    latest snapshot."""
    found, cfg = open_repo(repo)
    ws = workspaces.ensure(found, cfg, "T-1").path
    snap = _untracked_and_snapshot(ws)
    branch_tip = rev(ws, "HEAD")
    if shape == "locked initializing, zero HEAD":
        shutil.rmtree(ws)
        git(repo, "worktree", "prune")
        git(
            repo,
            "worktree",
            "add",
            "-q",
            "--no-checkout",
            "--lock",
            "--reason",
            "initializing",
            str(ws),
            "cairn/T-1",
        )
        (_admin(repo, ws) / "HEAD").write_text("0" * 40 + "\n")
    elif shape == "never checked out":
        shutil.rmtree(ws)
        git(repo, "worktree", "prune")
        git(repo, "worktree", "add", "-q", "--no-checkout", str(ws), "cairn/T-1")
    elif shape == "no HEAD":
        (_admin(repo, ws) / "HEAD").unlink()
    else:
        (ws / ".git").unlink()
        git(ws, "init", "-q")
    write(ws, "only-here.txt", "exists nowhere else\n")

    rebuilt = workspaces.ensure(found, cfg, "T-1")

    assert (rebuilt.path, rebuilt.created, rebuilt.repaired) == (ws, True, True)
    assert rebuilt.restored == snap
    assert any("not a complete checkout" in w and "moved it to" in w for w in rebuilt.warnings)
    assert git(ws, "symbolic-ref", "--short", "HEAD").strip() == "cairn/T-1"
    assert rev(ws, "HEAD") == branch_tip
    assert (ws / "feature.py").read_text() == "done = True\n"
    assert (ws / "notes.txt").read_text() == "uncommitted work\n"
    assert git(ws, "status", "--porcelain") == "?? notes.txt\n"
    [aside] = [p for p in ws.parent.iterdir() if p.name.startswith("T-1.orphan-")]
    assert (aside / "only-here.txt").read_text() == "exists nowhere else\n"
    listed = git(repo, "worktree", "list", "--porcelain")
    assert "locked" not in listed and "prunable" not in listed and str(aside) not in listed
    assert workspaces.ensure(found, cfg, "T-1").created is False  # whole now: reused


def test_a_worktree_locked_by_a_person_is_not_moved(repo: Path) -> None:
    found, cfg = open_repo(repo)
    ws = workspaces.ensure(found, cfg, "T-1").path
    (_admin(repo, ws) / "index").unlink()
    git(repo, "worktree", "lock", "--reason", "keep it", str(ws))
    with pytest.raises(BadInput, match="locked \\(keep it\\); run `git worktree unlock"):
        workspaces.ensure(found, cfg, "T-1")
    assert (ws / ".git").is_file()


def test_a_rebuild_cut_short_before_its_snapshot_was_back_restores_it_again(repo: Path) -> None:
    """The state a kill leaves between `git worktree add` and the restore of the snapshot: the
    worktree is whole at the branch tip, the snapshot's files are not in it, and the note that
    a restore is due is there."""
    found, cfg = open_repo(repo)
    ws = workspaces.ensure(found, cfg, "T-1").path
    snap = _untracked_and_snapshot(ws)
    shutil.rmtree(ws)
    git(repo, "worktree", "prune")
    due = repo / ".git/cairn/worktree-restores/T-1"
    due.parent.mkdir(parents=True)
    due.write_text(f"{snap}\n")
    git(repo, "worktree", "add", "-q", str(ws), "cairn/T-1")
    assert not (ws / "notes.txt").exists()

    again = workspaces.ensure(found, cfg, "T-1")

    assert (again.created, again.restored) == (False, snap)
    assert (ws / "notes.txt").read_text() == "uncommitted work\n"
    assert not due.exists()
    assert workspaces.ensure(found, cfg, "T-1").restored is None  # done once


def test_an_older_snapshot_is_not_restored_over_later_commits(repo: Path) -> None:
    found, cfg = open_repo(repo)
    ws = workspaces.ensure(found, cfg, "T-1")
    write(ws.path, "notes.txt", "old\n")
    snap = save(ws.path, "T-1")
    git(ws.path, "add", "notes.txt")
    git(ws.path, "commit", "-qm", "notes")
    write(ws.path, "notes.txt", "committed later\n")
    git(ws.path, "commit", "-qam", "more notes")
    shutil.rmtree(ws.path)
    rebuilt = workspaces.ensure(found, cfg, "T-1")
    assert rebuilt.repaired and rebuilt.restored is None
    assert (ws.path / "notes.txt").read_text() == "committed later\n"
    assert any(snap[:12] in w and "not restored" in w for w in rebuilt.warnings)


def test_workspace_root_inside_the_work_tree_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    for inside in (".", "wt", ".git/wt", str(repo / "x")):
        write(repo, "cairn.toml", f'[fleet]\nworkspace_root = "{inside}"\n')
        found, cfg = open_repo(repo)
        with pytest.raises(BadInput, match="is inside the"):
            workspaces.ensure(found, cfg, "T-1")
    write(repo, "cairn.toml", '[fleet]\nworkspace_root = "../elsewhere"\n')
    found, cfg = open_repo(repo)
    assert workspaces.ensure(found, cfg, "T-1").path == tmp_path / "elsewhere" / "T-1"


def test_the_ticket_branch_checked_out_in_the_main_work_tree_is_refused(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "cairn/T-1")
    found, cfg = open_repo(repo)
    with pytest.raises(BadInput, match="checked out in the main work tree"):
        workspaces.ensure(found, cfg, "T-1")


def test_a_bad_ticket_and_an_empty_repository_are_bad_input(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    found, cfg = open_repo(repo)
    with pytest.raises(BadInput, match="invalid ticket id"):
        workspaces.ensure(found, cfg, "../x")
    empty = make_repo(tmp_path / "empty", files={})
    found, cfg = open_repo(empty)
    with pytest.raises(BadInput, match="no commit yet"):
        workspaces.ensure(found, cfg, "T-1")


def test_lock_files_a_killed_git_left_are_removed_not_one_in_use(repo: Path) -> None:
    """A git killed while it updated the branch or the worktree's index leaves its lock file,
    and every later git there fails (`git worktree add` too): removed, unless a process still
    has it open."""
    found, cfg = open_repo(repo)
    ws = workspaces.ensure(found, cfg, "T-1").path
    admin = _admin(repo, ws)
    tip = rev(ws, "HEAD")
    (admin / "index.lock").write_bytes(b"DIRC\0\0\0\2 cut short")
    branch_lock = repo / ".git/refs/heads/cairn/T-1.lock"
    branch_lock.write_text(f"{tip}\n")
    with (admin / "HEAD.lock").open("w") as handle:
        holder = subprocess.Popen(["sleep", "120"], stdout=handle)
    try:
        again = workspaces.ensure(found, cfg, "T-1")
        assert not (admin / "index.lock").exists() and not branch_lock.exists()
        assert (admin / "HEAD.lock").exists()  # a live process has it open
        assert sum("left by a git killed" in w for w in again.warnings) == 2
    finally:
        holder.kill()
        holder.wait()
    workspaces.ensure(found, cfg, "T-1")
    write(ws, "more.txt", "more\n")
    git(ws, "add", "more.txt")
    git(ws, "commit", "-qm", "git works in it again")

    # the branch's lock left while no worktree is there: the worktree is still made
    branch_lock.write_text(f"{tip}\n")
    shutil.rmtree(ws)
    rebuilt = workspaces.ensure(found, cfg, "T-1")
    assert rebuilt.created and (ws / "more.txt").read_text() == "more\n"
    assert not branch_lock.exists()
