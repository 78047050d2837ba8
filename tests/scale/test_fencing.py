"""Fencing on the shared remote, without Temporal: two attempts of one ticket in two workspace
roots (two workers) against one bare repository. The newer attempt claims the ticket with its
own state commit; from then on every push of the older one is refused, whatever it pushes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.remote import statecommit
from cairn.remote.refs import Fenced
from cairn.scale import workspace
from cairn.scale.messages import TicketInput
from helpers import git
from scale.scale_setup import shared_repo

TICKET = "F-1"


def ticket_input(user: Path) -> TicketInput:
    plan = user / "cairn-queue" / f"{TICKET}.md"
    return TicketInput(TICKET, plan.name, plan.read_text(), str(user.parent / "shared.git"), "main")


def remote(bare: Path, ref: str) -> str:
    return git(bare, "rev-parse", "--verify", "-q", ref, check=False).strip()


@pytest.fixture
def user(tmp_path: Path) -> Path:
    return shared_repo(tmp_path, "127.0.0.1:1", {TICKET: 2})


def test_the_newer_attempt_claims_and_the_older_one_is_refused(tmp_path: Path, user: Path) -> None:
    bare, task = tmp_path / "shared.git", ticket_input(user)
    first = workspace.prepare(tmp_path / "w1", task, attempt=1)
    (first.worktree / "notes.txt").write_text("attempt 1 wrote this\n")
    progress = workspace.checkpoint(first, "heartbeat")
    assert progress.snapshot and remote(bare, f"refs/cairn/wip/{TICKET}") == progress.snapshot
    state = remote(bare, f"refs/cairn/state/{TICKET}")
    assert statecommit.claim_of(first.git, state) == statecommit.Claim(1, 1)

    second = workspace.prepare(tmp_path / "w2", task, attempt=2)
    # the older attempt's untracked file came back from its snapshot
    assert (second.worktree / "notes.txt").read_text() == "attempt 1 wrote this\n"
    claim = workspace.checkpoint(second, "segment start")
    assert claim.state != state  # a new attempt makes its own state commit, tree unchanged
    assert statecommit.claim_of(second.git, claim.state or "") == statecommit.Claim(2, 2)

    before = {ref: remote(bare, ref) for ref in second.refs.all()}
    (first.worktree / "notes.txt").write_text("the zombie wrote more\n")
    with pytest.raises(Fenced):
        workspace.checkpoint(first, "heartbeat")  # moves only the snapshot: still refused
    assert {ref: remote(bare, ref) for ref in second.refs.all()} == before

    (second.worktree / "more.txt").write_text("attempt 2\n")
    assert workspace.checkpoint(second, "heartbeat").snapshot == remote(
        bare, f"refs/cairn/wip/{TICKET}"
    )


def test_an_attempt_older_than_the_remote_s_stops_before_it_touches_anything(
    tmp_path: Path, user: Path
) -> None:
    task = ticket_input(user)
    later = workspace.prepare(tmp_path / "w2", task, attempt=3, segment="run-a/1")
    workspace.checkpoint(later, "segment start")
    with pytest.raises(Fenced, match="attempt 3 of ticket F-1 owns its refs; attempt 2 stops"):
        workspace.prepare(tmp_path / "w1", task, attempt=2, segment="run-a/1")


def test_the_generation_only_grows_across_segments_and_workflow_runs(
    tmp_path: Path, user: Path
) -> None:
    """Temporal's attempt starts at 1 again for each segment: a ticket whose first segment was
    retried (attempt 2) runs its second segment as attempt 1, which must claim, not be fenced
    by its own predecessor; an older generation's push is refused."""
    bare, task = tmp_path / "shared.git", ticket_input(user)
    zombie = workspace.prepare(tmp_path / "w1", task, attempt=1, segment="run-a/1")
    workspace.checkpoint(zombie, "segment start")
    retried = workspace.prepare(tmp_path / "w2", task, attempt=2, segment="run-a/1")
    workspace.checkpoint(retried, "segment end")
    second = workspace.prepare(tmp_path / "w1", task, attempt=1, segment="run-a/2")
    claim = workspace.checkpoint(second, "segment start")  # the tree did not change
    assert (claim.generation, claim.attempt) == (3, 1)
    state = remote(bare, f"refs/cairn/state/{TICKET}")
    assert claim.state == state and statecommit.claim_of(second.git, state).generation == 3
    # a new workflow run (continue-as-new, or a restarted ticket) goes on counting
    third = workspace.prepare(tmp_path / "w2", task, attempt=1, segment="run-b/1")
    assert workspace.checkpoint(third, "segment start").generation == 4
    generations = git(
        bare, "log", "--format=%(trailers:key=Cairn-Generation,valueonly)", state
    ).split()
    assert generations == ["3", "2", "1"]
    before = {ref: remote(bare, ref) for ref in third.refs.all()}
    for older in (second, retried):  # every older generation's push is refused whole
        (older.worktree / "late.txt").write_text("a zombie's work\n")
        with pytest.raises(Fenced):
            workspace.checkpoint(older, "heartbeat")
    assert {ref: remote(bare, ref) for ref in third.refs.all()} == before


def test_a_checkpoint_with_nothing_new_pushes_nothing(tmp_path: Path, user: Path) -> None:
    bare, task = tmp_path / "shared.git", ticket_input(user)
    space = workspace.prepare(tmp_path / "w1", task, attempt=1)
    first = workspace.checkpoint(space, "segment start")
    hooks = bare / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-receive").write_text('#!/bin/sh\necho pushed >> "$GIT_DIR/pushes"\n')
    (hooks / "pre-receive").chmod(0o755)
    again = workspace.checkpoint(space, "heartbeat")
    assert (again.branch, again.snapshot) == (first.branch, first.snapshot)
    assert again.state == first.state
    assert not (bare / "pushes").exists()


def test_what_an_ended_run_left_uncommitted_lands_on_the_branch(tmp_path: Path, user: Path) -> None:
    bare, task = tmp_path / "shared.git", ticket_input(user)
    space = workspace.prepare(tmp_path / "w1", task, attempt=1)
    assert not workspace.commit_leftovers(space)  # nothing left: no commit
    (space.worktree / "work").mkdir()
    (space.worktree / "work" / "last.txt").write_text("the last task's file\n")
    assert workspace.commit_leftovers(space)
    progress = workspace.checkpoint(space, "segment end")
    assert progress.branch == remote(bare, f"refs/heads/cairn/{TICKET}")
    assert git(bare, "show", f"cairn/{TICKET}:work/last.txt") == "the last task's file\n"
    assert "left uncommitted" in git(bare, "log", "-1", "--format=%s", f"cairn/{TICKET}")
