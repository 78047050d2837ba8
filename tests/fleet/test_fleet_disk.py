"""A full disk under the fleet (issue 22, item 11): no attempt is spent while the free space is
under ``[fleet] min_free_disk``; the fleet waits, saying so, and the ticket goes on once there
is room, in this supervisor or the next. On a real small tmpfs (root), where an agent fills
the disk as one writing a huge file would."""

from __future__ import annotations

import signal
from datetime import datetime
from pathlib import Path

import msgspec
import pytest

from cairn.config.records import FleetConfig
from cairn.fleet import schedule
from cairn.fleet.fleetstate import FleetTicket
from fleet.fleet_setup import finish, record, scripted_fleet, summary_of, supervisor, wait_line
from helpers import fill_disk, small_tmpfs

FILL = "dd if=/dev/zero of=fill bs=64k >/dev/null 2>&1; true"
SCRIPT = {
    "coder": [
        [
            {"cairn": ["task", "start", "1"]},
            {"write": {"path": "a.txt", "content": "a\n"}},
            {"run": FILL},  # the agent fills the disk
        ],
        [{"cairn": ["task", "done", "1", "--files", "a.txt"]}],
        [{"cairn": ["task", "done", "2"]}],
    ]
}


def test_a_full_disk_spends_no_attempt_and_the_fleet_waits_for_room(tmp_path: Path) -> None:
    mount = tmp_path / "disk"
    with small_tmpfs(mount, "40m") as refused:
        if refused:
            pytest.skip(f"cannot mount a small tmpfs here ({refused})")
        repo = scripted_fleet(
            tmp_path, {"d1": 2}, SCRIPT, root=mount, min_free_disk="8MiB", max_attempts=1
        )
        filler = mount / "filler"
        fill_disk(filler, leave=3 << 20)

        # too little room to start: the ticket waits, no attempt is made
        proc = supervisor(repo, {})
        waiting = wait_line(proc, "waiting")
        assert "is below fleet.min_free_disk 8 MiB" in waiting["message"], waiting
        held = record(repo, "d1")
        assert (held["state"], held["attempt"]) == ("queued", 0)
        assert held["detail"].startswith("waiting: free disk space")

        # room again: it starts; its agent fills the disk, the run stops disk_full, and the
        # attempt is not spent: the fleet waits for room again, saying so
        filler.unlink()
        started = wait_line(proc, "ticket_started")
        assert (started["attempt"], started["command"]) == (1, "run")
        waiting = wait_line(proc, "waiting")  # the supervisor's own writes fail too: it goes on
        assert waiting["message"].startswith("waiting: the disk is full"), waiting
        waiting = wait_line(proc, "waiting")
        assert "is below fleet.min_free_disk 8 MiB" in waiting["message"], waiting
        proc.send_signal(signal.SIGTERM)
        code, lines = finish(proc, timeout=60)
        assert code == 3, lines
        assert [e for e in lines if e["event"] == "ticket_started"] == []  # not tried again
        # its only attempt was not spent: it is due again, not interrupted for good
        assert lines[-1]["tickets"] == {"d1": "retrying"}

        # a person frees the space: the next fleet start picks the ticket up and finishes it
        (Path(held["worktree"] or mount / "repo.cairn" / "d1") / "fill").unlink()
        code, lines = finish(supervisor(repo, {}, "--once"), timeout=120)
        assert code == 0, lines
        done = record(repo, "d1")
        assert (done["state"], done["attempt"]) == ("completed", 1), done
        assert [(e["attempt"], e["command"]) for e in lines if e["event"] == "ticket_started"] == [
            (1, "resume")
        ]
        assert "Completed — 2 of 2 tasks" in summary_of(repo, "d1")


def _record(attempt: int) -> FleetTicket:
    return msgspec.convert(
        {
            "ticket": "D-1",
            "plan": "cairn-queue/D-1.md",
            "state": "running",
            "attempt": attempt,
            "updated": datetime.now().astimezone(),
        },
        FleetTicket,
    )


@pytest.mark.parametrize(
    ("code", "reason", "detail", "low", "full"),
    [
        (3, "disk_full", None, False, True),  # the run's own cutoff says so
        (1, "crash", "No space left on device: /repo/.git/cairn", False, True),  # its error
        (None, "crash", None, True, True),  # killed, and the disk is full now
        (1, "crash", "boom", False, False),
        (3, "max_turns", None, True, False),  # another cutoff, whatever the disk
        (2, None, "No space left on device", True, False),  # a refusal is bad input
    ],
)
def test_what_is_taken_for_a_full_disk(
    code: int | None, reason: str, detail: str | None, low: bool, full: bool
) -> None:
    note = "waiting: free disk space 0.2 MiB on /repo is below fleet.min_free_disk 1 MiB"
    assert schedule.out_of_space(code, reason, detail, note if low else None) is full


def test_a_disk_full_attempt_counts_only_when_there_is_room_again() -> None:
    config = msgspec.convert({"retry_backoff": "10s", "max_attempts": 1}, FleetConfig)
    now = datetime.now().astimezone()
    note = "waiting: free disk space 0.2 MiB on /repo is below fleet.min_free_disk 1 MiB"
    low = schedule.after_attempt(config, _record(1), 3, "disk_full", None, False, now, disk=note)
    assert (low.state, low.counted) == ("retrying", False)
    assert low.detail == f"disk full; {note}"
    room = schedule.after_attempt(config, _record(1), 3, "disk_full", None, False, now)
    assert (room.state, room.counted) == ("interrupted", True)
