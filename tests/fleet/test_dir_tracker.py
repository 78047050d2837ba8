"""The ``dir`` tracker: plan files in the queue directory, one ticket each."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from cairn import config as config_module
from cairn.errors import BadInput
from cairn.fleet import fleetstate
from cairn.fleet.trackers import TRACKERS, Candidate, DirTracker, open_tracker
from cairn.git import Repo
from cairn.state.layout import Layout
from helpers import make_repo, write

PLAN = "## Task 1: do it\nWrite the code.\n"


def tracker_for(repo: Path) -> tuple[DirTracker, Layout]:
    found = Repo.discover(repo)
    cfg = config_module.load(found.toplevel)
    layout = Layout.for_repo(found, cfg)
    tracker = open_tracker(found, cfg, layout)
    assert isinstance(tracker, DirTracker)
    return tracker, layout


def test_ticket_from_front_matter_or_file_stem(repo: Path) -> None:
    write(repo, "cairn-queue/login.md", f"---\nticket: PROJ-7\ntitle: Login\n---\n{PLAN}")
    write(repo, "cairn-queue/PROJ-8.md", PLAN)
    write(repo, "cairn-queue/PROJ-9.yaml", "tasks:\n  - title: one\n")
    write(repo, "cairn-queue/other.json", '{"ticket": "PROJ-10", "tasks": [{"title": "x"}]}')
    write(repo, "cairn-queue/notes.txt", "not a plan\n")
    write(repo, "cairn-queue/.draft.md", PLAN)
    tracker, _ = tracker_for(repo)
    queue = repo / "cairn-queue"
    assert tracker.candidates() == [
        Candidate("PROJ-10", queue / "other.json"),
        Candidate("PROJ-7", queue / "login.md"),
        Candidate("PROJ-8", queue / "PROJ-8.md"),
        Candidate("PROJ-9", queue / "PROJ-9.yaml"),
    ]
    assert tracker.rejected == []
    assert TRACKERS["dir"] is DirTracker


def test_bad_ids_are_rejected_with_a_clear_message_and_do_not_stop_the_rest(repo: Path) -> None:
    write(repo, "cairn-queue/fix the login.md", PLAN)
    write(repo, "cairn-queue/bad-front.md", f"---\nticket: ../../etc\n---\n{PLAN}")
    write(repo, "cairn-queue/broken.md", "---\nticket: [unclosed\n---\n")
    write(repo, "cairn-queue/A-1.md", PLAN)
    write(repo, "cairn-queue/dupe.md", f"---\nticket: A-1\n---\n{PLAN}")
    tracker, _ = tracker_for(repo)
    assert [c.ticket for c in tracker.candidates()] == ["A-1"]
    problems = {Path(r.plan).name: r.reason for r in tracker.rejected}
    assert set(problems) == {"fix the login.md", "bad-front.md", "broken.md", "dupe.md"}
    assert "is not a ticket id" in problems["fix the login.md"]
    assert "rename it fix-the-login.md" in problems["fix the login.md"]
    assert "invalid ticket id '../../etc'" in problems["bad-front.md"]
    assert "broken.md" in problems["broken.md"]
    assert "names ticket 'A-1', as A-1.md does" in problems["dupe.md"]
    assert all("\n" not in p for p in problems.values())


def test_a_duplicate_never_takes_the_ticket_from_the_plan_it_runs(repo: Path) -> None:
    write(repo, "cairn-queue/A-1.md", PLAN)
    tracker, _ = tracker_for(repo)
    assert [c.ticket for c in tracker.candidates()] == ["A-1"]
    assert tracker.claim("A-1")  # its record names cairn-queue/A-1.md
    write(repo, "cairn-queue/0-first.md", f"---\nticket: A-1\n---\n{PLAN}")  # sorts first
    assert tracker.candidates() == [Candidate("A-1", repo / "cairn-queue" / "A-1.md")]
    (refused,) = tracker.rejected
    assert (refused.plan, refused.ticket) == ("cairn-queue/0-first.md", "A-1")
    assert "plan 0-first.md names ticket 'A-1', as A-1.md does" in refused.reason


def test_a_plan_added_later_is_listed_at_the_next_call(repo: Path) -> None:
    tracker, _ = tracker_for(repo)
    assert tracker.candidates() == []  # no queue directory yet: nothing, no error
    write(repo, "cairn-queue/T-1.md", PLAN)
    assert [c.ticket for c in tracker.candidates()] == ["T-1"]
    write(repo, "cairn-queue/T-2.md", PLAN)
    assert [c.ticket for c in tracker.candidates()] == ["T-1", "T-2"]
    # an edited plan is read again (the cache is keyed on the file's mtime and size)
    write(repo, "cairn-queue/T-2.md", f"---\nticket: T-3\n---\n{PLAN}")
    assert [c.ticket for c in tracker.candidates()] == ["T-1", "T-3"]


def test_finished_tickets_are_recorded_not_relisted_and_their_plans_stay(repo: Path) -> None:
    plan = write(repo, "cairn-queue/T-1.md", PLAN)
    write(repo, "cairn-queue/T-2.md", PLAN)
    tracker, layout = tracker_for(repo)
    assert [c.ticket for c in tracker.candidates()] == ["T-1", "T-2"]
    assert tracker.claim("T-1")
    record = fleetstate.read(layout, "T-1")
    assert record is not None and record.state == "queued"
    assert record.plan == "cairn-queue/T-1.md"
    tracker.transition("T-1", "running")
    assert [c.ticket for c in tracker.candidates()] == ["T-1", "T-2"]  # running: not finished
    tracker.finish("T-1", "completed")
    assert [c.ticket for c in tracker.candidates()] == ["T-2"]
    assert not tracker.claim("T-1")
    assert plan.read_text() == PLAN  # never moved or deleted
    record = fleetstate.read(layout, "T-1")
    assert record is not None and record.state == "completed"
    # a new tracker (a restarted supervisor) reads the same records
    again, _ = tracker_for(repo)
    assert [c.ticket for c in again.candidates()] == ["T-2"]


def test_interrupted_is_final_only_once_its_attempts_are_spent(repo: Path) -> None:
    write(repo, "cairn-queue/T-1.md", PLAN)
    tracker, layout = tracker_for(repo)
    tracker.candidates()
    tracker.claim("T-1")
    tracker.transition("T-1", "interrupted", "stopped by the user")
    assert [c.ticket for c in tracker.candidates()] == ["T-1"]  # a graceful stop: resumable
    record = fleetstate.read(layout, "T-1")
    assert record is not None and record.detail == "stopped by the user"
    fleetstate.write(layout, msgspec.structs.replace(record, attempt=3))
    assert tracker.candidates() == []  # max_attempts = 3, spent


def test_a_state_outside_the_vocabulary_is_refused(repo: Path) -> None:
    write(repo, "cairn-queue/T-1.md", PLAN)
    tracker, layout = tracker_for(repo)
    tracker.candidates()
    tracker.claim("T-1")
    with pytest.raises(ValueError):
        tracker.transition("T-1", "exploded")
    record = fleetstate.read(layout, "T-1")
    assert record is not None and record.state == "queued"


def test_queue_is_configurable_and_must_be_a_directory(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    write(repo, "cairn.toml", '[fleet]\nqueue = "work/plans"\n')
    write(repo, "work/plans/X-1.md", PLAN)
    tracker, _ = tracker_for(repo)
    assert [c.ticket for c in tracker.candidates()] == ["X-1"]
    write(repo, "cairn.toml", '[fleet]\nqueue = "README.md"\n')
    tracker, _ = tracker_for(repo)
    with pytest.raises(BadInput, match="is not a directory"):
        tracker.candidates()
