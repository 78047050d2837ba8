"""The fleet's records (``cairn.fleet.fleetstate``): written atomically, read back exactly,
listed sorted, and a broken file skipped with a warning (never a traceback, never hiding the
others); a running record whose process is gone reads as interrupted."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import msgspec
import pytest

from cairn.errors import BadInput, CorruptState
from cairn.fleet import fleetstate
from cairn.fleet.fleetstate import FleetTicket
from cairn.state.layout import Layout
from cairn.terms import FLEET_STATES
from cairn.util.procs import process_start
from helpers import dead_pid

NOW = datetime(2026, 11, 30, 10, 15, 0, 250000, tzinfo=UTC)


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return Layout(tmp_path / "state")


def full() -> FleetTicket:
    return FleetTicket(
        ticket="T-1",
        plan="cairn-queue/T-1.md",
        state="retrying",
        attempt=2,
        next_attempt_at=NOW + timedelta(seconds=20),
        worktree="/work/repo.cairn/T-1",
        branch="cairn/T-1",
        pid=4242,
        pid_started_at=1764497700.25,
        last_exit=3,
        last_reason="stall",
        detail="Interrupted — stall",
        updated=NOW,
    )


def test_round_trip_of_every_field(layout: Layout) -> None:
    record = full()
    fleetstate.write(layout, record)
    assert fleetstate.read(layout, "T-1") == record
    path = layout.root / "fleet" / "tickets" / "T-1.json"
    assert path.is_file()
    assert '"updated": "2026-11-30T10:15:00.250000Z"' in path.read_text()
    assert [p.name for p in path.parent.iterdir()] == ["T-1.json"]  # no temp file left


def test_minimal_record_and_defaults(layout: Layout) -> None:
    record = FleetTicket(ticket="Q-1", plan="q/Q-1.md", state="queued", updated=NOW)
    fleetstate.write(layout, record)
    back = fleetstate.read(layout, "Q-1")
    assert back == record and back is not None
    assert back.attempt == 0 and back.worktree is None and back.next_attempt_at is None


def test_times_keep_their_offset_and_naive_times_are_utc(layout: Layout) -> None:
    east = timezone(timedelta(hours=2))
    fleetstate.write(layout, msgspec.structs.replace(full(), updated=NOW.astimezone(east)))
    back = fleetstate.read(layout, "T-1")
    assert back is not None and back.updated == NOW
    path = fleetstate.record_path(layout, "T-1")
    path.write_text(
        path.read_text().replace("2026-11-30T12:15:00.250000+02:00", "2026-11-30T10:15:00")
    )
    again = fleetstate.read(layout, "T-1")
    assert again is not None and again.updated.utcoffset() == timedelta(0)


def test_rewrite_replaces_and_listing_is_sorted(layout: Layout) -> None:
    for ticket in ("b-2", "A-1", "c-3"):
        fleetstate.write(layout, FleetTicket(ticket=ticket, plan="p", state="queued", updated=NOW))
    fleetstate.write(
        layout, FleetTicket(ticket="b-2", plan="p", state="completed", attempt=1, updated=NOW)
    )
    listed = fleetstate.listing(layout, [])
    assert [r.ticket for r in listed] == ["A-1", "b-2", "c-3"]
    assert listed[1].state == "completed"
    assert layout.list_fleet_tickets() == ["A-1", "b-2", "c-3"]


def test_no_fleet_directory_lists_nothing(layout: Layout) -> None:
    assert fleetstate.listing(layout, []) == []
    assert fleetstate.read(layout, "T-1") is None


def test_every_state_is_accepted_and_others_are_not(layout: Layout) -> None:
    record = {"ticket": "T-1", "plan": "p", "updated": NOW}
    for state in FLEET_STATES:
        msgspec.convert({**record, "state": state}, FleetTicket)
    with pytest.raises(ValueError):
        msgspec.convert({**record, "state": "sleeping"}, FleetTicket)
    with pytest.raises(ValueError):
        FleetTicket(ticket="bad id!", plan="p", state="queued", updated=NOW)


BROKEN: dict[str, tuple[str | bytes, str]] = {
    "J-1.json": ("{not json", "is not valid JSON"),
    "J-2.json": ("[1, 2]", "is not a JSON object"),
    "J-3.json": (
        '{"ticket": "J-3", "plan": "p", "state": "sleeping", "updated": "2026-11-30T10:15:00Z"}',
        "state",
    ),
    "J-4.json": ('{"ticket": "J-4", "plan": "p", "state": "queued"}', "updated"),
    "J-5.json": (
        '{"ticket": "J-5", "plan": "p", "state": "queued", "attempt": "two", '
        '"updated": "2026-11-30T10:15:00Z"}',
        "attempt",
    ),
    "J-6.json": (
        '{"ticket": "OTHER", "plan": "p", "state": "queued", "updated": "2026-11-30T10:15:00Z"}',
        "is for ticket 'OTHER'",
    ),
    "J-7.json": (
        '{"ticket": "J-7", "plan": "p", "state": "queued", "updated": "yesterday"}',
        "updated",
    ),
    "J-8.json": (b"\xff\xfe{}", "is not UTF-8 text"),
    "bad name!.json": (
        '{"ticket": "x", "plan": "p", "state": "queued", "updated": "2026-11-30T10:15:00Z"}',
        "not named after a valid ticket id",
    ),
}


def test_listing_skips_each_broken_file_with_a_warning(layout: Layout) -> None:
    good = FleetTicket(ticket="G-1", plan="p", state="queued", updated=NOW)
    fleetstate.write(layout, good)
    directory = layout.fleet_tickets_dir
    for name, (content, _) in BROKEN.items():
        data = content.encode() if isinstance(content, str) else content
        (directory / name).write_bytes(data)
    (directory / "L-1.json").symlink_to(directory / "G-1.json")
    (directory / "D-1.json").mkdir()
    (directory / "notes.txt").write_text("not a record")
    warnings: list[str] = []
    assert fleetstate.listing(layout, warnings) == [good]
    assert len(warnings) == len(BROKEN) + 2
    for name, (_, why) in BROKEN.items():
        (found,) = [w for w in warnings if f"/{name}" in w]
        assert why in found and found.endswith("; skipped"), found
    assert any("L-1.json is a symlink" in w for w in warnings)
    assert any("D-1.json is not a regular file" in w for w in warnings)
    with pytest.raises(CorruptState, match="is not valid JSON; fix it or delete it"):
        fleetstate.read(layout, "J-1")
    with pytest.raises(BadInput, match="symlink"):
        fleetstate.read(layout, "L-1")


def test_listing_returns_its_warnings_and_prints_nothing(
    layout: Layout, capfd: pytest.CaptureFixture[str]
) -> None:
    fleetstate.write(layout, FleetTicket(ticket="G-1", plan="p", state="queued", updated=NOW))
    (layout.fleet_tickets_dir / "J-1.json").write_text("{")
    warnings: list[str] = []
    assert [r.ticket for r in fleetstate.listing(layout, warnings)] == ["G-1"]
    assert capfd.readouterr() == ("", "")
    (warning,) = warnings
    assert warning.startswith("fleet record ") and "J-1.json is not valid JSON" in warning


def test_a_symlinked_fleet_directory_is_refused(layout: Layout, tmp_path: Path) -> None:
    layout.root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (layout.root / "fleet").symlink_to(tmp_path / "elsewhere")
    record = FleetTicket(ticket="G-1", plan="p", state="queued", updated=NOW)
    with pytest.raises(BadInput, match="symlink"):
        fleetstate.write(layout, record)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_live_state_of_a_running_record() -> None:
    running = FleetTicket(ticket="R-1", plan="p", state="running", pid=dead_pid(), updated=NOW)
    state, detail = fleetstate.live_state(running)
    assert state == "interrupted" and detail is not None and "is gone" in detail
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = process_start(child.pid)
        assert started is not None and started.since_boot is not None
        alive = msgspec.structs.replace(
            running,
            pid=child.pid,
            pid_started_at=started.at.timestamp(),
            pid_started_since_boot=started.since_boot,
        )
        assert fleetstate.live_state(alive) == ("running", None)
        # the clock stepped an hour since the record: its start counted from boot still holds
        stepped = msgspec.structs.replace(alive, pid_started_at=started.at.timestamp() - 3600)
        assert fleetstate.live_state(stepped) == ("running", None)
        reused = msgspec.structs.replace(stepped, pid_started_since_boot=started.since_boot - 3600)
        assert fleetstate.live_state(reused)[0] == "interrupted"
    finally:
        child.kill()
        child.wait()
    queued = FleetTicket(ticket="Q-1", plan="p", state="queued", pid=os.getpid(), updated=NOW)
    assert fleetstate.live_state(queued) == ("queued", None)
