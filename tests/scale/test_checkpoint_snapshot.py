"""A checkpoint's snapshot (no Temporal: two workspace roots against one bare repository): a
failed save is never hidden, and the branch and the snapshot reach the remote as a pair a retry
restores, even when the agent commits between the save and the push."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path

import pytest

from cairn.remote import checkpoint as pushing
from cairn.scale import workspace
from cairn.scale.messages import TicketInput
from helpers import git
from scale.scale_setup import shared_repo

TICKET = "C-1"


@pytest.fixture
def task(tmp_path: Path) -> TicketInput:
    user = shared_repo(tmp_path, "127.0.0.1:1", {TICKET: 2})
    plan = user / "cairn-queue" / f"{TICKET}.md"
    return TicketInput(TICKET, plan.name, plan.read_text(), str(tmp_path / "shared.git"), "main")


def remote(bare: Path, ref: str) -> str:
    return git(bare, "rev-parse", "--verify", "-q", ref, check=False).strip()


def test_an_agent_commit_between_the_save_and_the_push_keeps_the_pair_restorable(
    tmp_path: Path, task: TicketInput, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = workspace.prepare(tmp_path / "w1", task, attempt=1)
    workspace.checkpoint(space, "segment start")
    (space.worktree / "kept.txt").write_text("committed by the agent\n")
    (space.worktree / "loose.txt").write_text("never committed\n")
    save = pushing.snapshot

    def then_the_agent_commits(space: pushing.Side, reason: str) -> None:
        save(space, reason)  # the real save, then a real commit before the checkpoint reads
        git(space.worktree, "add", "kept.txt")
        git(space.worktree, "commit", "-qm", "the agent's commit")

    monkeypatch.setattr(pushing, "snapshot", then_the_agent_commits)
    progress = workspace.checkpoint(space, "heartbeat")
    monkeypatch.undo()
    bare = tmp_path / "shared.git"
    base = git(
        bare,
        "log",
        "-1",
        "--format=%(trailers:key=Cairn-Base,valueonly)",
        f"refs/cairn/wip/{TICKET}",
    )
    assert progress.branch == remote(bare, f"refs/heads/cairn/{TICKET}") == base.strip()

    retry = workspace.prepare(tmp_path / "w2", task, attempt=2)
    assert (retry.worktree / "loose.txt").read_text() == "never committed\n"  # restored
    assert (retry.worktree / "kept.txt").read_text() == "committed by the agent\n"
    # the agent's commit goes with the next checkpoint
    later = workspace.checkpoint(space, "heartbeat")
    assert later.branch == git(space.worktree, "rev-parse", "HEAD").strip()


def test_a_snapshot_that_fails_fails_the_checkpoint(tmp_path: Path, task: TicketInput) -> None:
    space = workspace.prepare(tmp_path / "w1", task, attempt=1)
    first = workspace.checkpoint(space, "segment start")
    (space.worktree / "new.txt").write_text("to snapshot\n")
    locks = space.clone / ".git" / "cairn" / "locks"
    shutil.rmtree(locks, ignore_errors=True)
    locks.write_text("a file where the snapshot's lock directory belongs\n")
    with pytest.raises(Exception, match="locks"):
        workspace.checkpoint(space, "heartbeat")
    bare = tmp_path / "shared.git"
    assert remote(bare, f"refs/cairn/state/{TICKET}") == first.state  # nothing pushed


def test_the_run_s_own_save_holding_the_ref_skips_the_snapshot_with_a_warning(
    tmp_path: Path, task: TicketInput, caplog: pytest.LogCaptureFixture
) -> None:
    space = workspace.prepare(tmp_path / "w1", task, attempt=1)
    first = workspace.checkpoint(space, "segment start")
    (space.worktree / "new.txt").write_text("to snapshot\n")
    (space.state_dir / "note").write_text("the run state moved\n")
    locks = space.clone / ".git" / "cairn" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    fd = os.open(locks / f"ref-{TICKET}", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as the run's own save holds it (cutoff 3 s here)
        with caplog.at_level(logging.WARNING, logger="cairn.remote.checkpoint"):
            progress = workspace.checkpoint(space, "heartbeat")
    finally:
        os.close(fd)
    assert progress.snapshot == first.snapshot and progress.state != first.state  # pushed
    (record,) = caplog.records
    assert record.getMessage().startswith(f"cairn: {TICKET}: checkpoint (heartbeat) without a new")
