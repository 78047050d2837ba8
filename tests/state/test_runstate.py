"""A run's lifecycle: begin writes everything before the first turn; ends leave a true record."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from cairn import summary
from cairn.errors import BadInput
from cairn.state import journal, marker
from cairn.state.runstate import RunRef, edit_summary, finish, interrupt, update_marker
from cairn.summary.render import status_line
from cairn.util import clock
from helpers import begin_run, hold_run, summary_file


def events(ref: RunRef) -> list[str]:
    found, warnings = journal.read(ref.run_dir)
    assert warnings == []
    return [e["event"] for e in found]


def test_begin_writes_scaffold_marker_and_journal(repo: Path) -> None:
    ref, lease = begin_run(repo, "T-1", ["One", "Two"])
    try:
        loaded = summary.load(summary_file(ref))
        assert loaded is not None and loaded.run == ref.run_id and loaded.ticket == "T-1"
        assert status_line(loaded) == "Not started — 0 of 2 tasks"
        current = marker.read(ref.marker_path)
        assert current is not None
        assert (current.skill, current.phase, current.run) == ("impl", "implement", ref.run_id)
        assert current.owner == lease.me
        assert events(ref) == ["run_started"]
    finally:
        lease.release()


def test_marker_updates_and_journal(repo: Path) -> None:
    ref, lease = begin_run(repo, "T-1", ["One"])
    update_marker(
        ref, "dispatch_started", dispatch=marker.DispatchRecord(role="coder", turn=0, max_turns=150)
    )
    update_marker(ref, "phase", phase="review", round=1)
    current = marker.read(ref.marker_path)
    assert current is not None and current.dispatch is not None
    assert (current.phase, current.round, current.dispatch.max_turns) == ("review", 1, 150)
    found, _ = journal.read(ref.run_dir)
    assert found[-2]["dispatch"] == {"role": "coder", "turn": 0, "max_turns": 150}
    assert found[-1] == {**found[-1], "event": "phase", "phase": "review", "round": 1}
    lease.release()


def test_interrupt_records_reason_and_snapshot(repo: Path) -> None:
    ref, lease = begin_run(repo, "T-1", ["One", "Two"])
    edit_summary(ref, lambda s: summary.start_task(s, 1, clock.now()), "task", task=1)
    snap = marker.SnapshotRef(ref="refs/cairn/wip/T-1", commit="ab" * 20, at=clock.now())
    after = interrupt(ref, lease, "max_turns", snap)
    assert status_line(after) == (
        f"Interrupted — max_turns during task 1 of 2; work saved at refs/cairn/wip/T-1 ({'ab' * 6})"
    )
    current = marker.read(ref.marker_path)
    assert current is not None and current.owner is None and current.snapshot == snap
    assert events(ref)[-1] == "run_interrupted"
    _again, lease2 = begin_run(repo, "T-1", ["One", "Two"])
    assert lease2.takeover is None
    assert lease2.previous is not None and lease2.previous.run == ref.run_id
    lease2.release()


def test_finish_completes_and_removes_marker(repo: Path) -> None:
    ref, lease = begin_run(repo, "T-1", ["One"])
    with pytest.raises(BadInput, match="pending"):
        finish(ref, lease)
    assert ref.marker_path.exists()
    edit_summary(ref, lambda s: summary.complete_task(s, 0, clock.now()), "task", task=0)
    done = finish(ref, lease)
    assert status_line(done) == "Completed — 1 of 1 tasks"
    assert not ref.marker_path.exists()
    assert events(ref)[-1] == "run_finished"


def test_killed_owner_is_taken_over_and_journalled(repo: Path) -> None:
    proc, old_run = hold_run(repo, "T-1", ["One"])
    with pytest.raises(BadInput, match=f"pid {proc.pid}"):
        begin_run(repo, "T-1", ["One"])
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    ref, lease = begin_run(repo, "T-1", ["One"])
    try:
        assert lease.takeover is not None and "gone" in lease.takeover
        found, _ = journal.read(ref.run_dir)
        takeover = next(e for e in found if e["event"] == "takeover")
        assert takeover["previous_run"] == old_run
        assert takeover["previous_owner"]["pid"] == proc.pid
    finally:
        lease.release()
