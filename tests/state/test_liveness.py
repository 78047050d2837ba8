"""Owner liveness: zombies are dead, pid 1 is not a cairn run, a clock ahead cannot pin a ticket.

Issue 12, defects 8 (a SIGKILLed cairn not yet reaped by its parent counted as alive: resume
refused, and a dead agent was "stopped"), 14 (a marker naming owner pid 1 without a start time
blocked resume) and 6 (a remote owner whose ``last_updated`` is in the future never went stale,
and ``--takeover`` was refused).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import msgspec
import psutil
import pytest

from cairn.errors import BadInput
from cairn.run import reclaiming
from cairn.state import lease, marker, owner
from cairn.state.layout import Layout
from cairn.state.owner import Owner
from cairn.util import clock, procs
from helpers import cairn, hold_run, make_repo, state_root

DAY = 86400.0


def is_zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and is not reaped yet, as the operating system tells."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.ZombieProcess:
        return True


@pytest.fixture
def zombie() -> Iterator[int]:
    """A child that has exited and that nobody has reaped yet (state Z)."""
    proc = subprocess.Popen(["true"])
    deadline = time.monotonic() + 5
    while not is_zombie(proc.pid):
        assert time.monotonic() < deadline, "the child did not become a zombie"
        time.sleep(0.005)
    try:
        yield proc.pid
    finally:
        proc.wait()


def test_a_zombie_is_not_alive(zombie: int) -> None:
    os.kill(zombie, 0)  # the kernel still has the pid: this is why kill(0) was not enough
    assert not procs.pid_alive(zombie)
    assert procs.pid_alive(os.getpid())
    assert not procs.pid_alive(-1) and not procs.pid_alive(0)


def test_a_killed_cairn_not_yet_reaped_is_dead_for_catchup_and_takeover(repo: Path) -> None:
    proc, _ = hold_run(repo, "T-1", ["One", "Two"])
    try:
        proc.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while not is_zombie(proc.pid):
            assert time.monotonic() < deadline
            time.sleep(0.005)
        report = json.loads(cairn("catchup", "T-1", "--json", cwd=repo).stdout)
        assert (report["state"], report["owner_state"]) == ("interrupted", "dead"), report
        resumed = cairn("resume", "T-1", "--agent", "scripted", cwd=repo)
        assert "being run right now" not in resumed.stderr
        layout = Layout(state_root(repo))
        with lease.acquire(layout, "T-1", stale_after=DAY) as taken:
            assert taken.takeover is not None and "gone" in taken.takeover
    finally:
        proc.wait()


def test_a_dead_agent_left_as_a_zombie_is_not_stopped_again(zombie: int) -> None:
    me = owner.me()
    previous = marker.Marker(
        phase="implement",
        started_at=clock.now(),
        last_updated=clock.now(),
        owner=me,
        dispatch=marker.DispatchRecord(
            role="coder", pid=zombie, pid_started_at=owner.of(zombie).pid_started_at
        ),
    )
    assert reclaiming._stop_orphaned_agent(previous, grace=5.0) is None


def test_a_zombie_group_leader_does_not_stall_stopping_its_group() -> None:
    """The leader of an agent's group has exited (a zombie), a grandchild still runs: the
    group is stopped at once, not after the whole grace period."""
    script = "import subprocess, os, sys; subprocess.Popen(['sleep', '60']); os._exit(0)"
    leader = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    while not is_zombie(leader.pid):
        time.sleep(0.005)
    started = time.monotonic()
    procs.stop_group(leader.pid, grace=10.0)
    assert time.monotonic() - started < 5.0
    leader.wait()
    deadline = time.monotonic() + 5
    while running_in_group(leader.pid):
        assert time.monotonic() < deadline, "the group outlived stop_group"
        time.sleep(0.01)


def running_in_group(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies (whoever reaps those)."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and not is_zombie(process.pid):
                found.append(process.pid)
        except (psutil.Error, OSError):
            continue
    return found


def local(pid: int, started: bool) -> Owner:
    mine = owner.of(pid)
    if started:
        return mine
    return msgspec.structs.replace(mine, pid_started_at=None, pid_started_since_boot=None)


def test_pid_1_without_a_start_time_is_not_a_cairn_run() -> None:
    now = clock.now()
    state, why = owner.check(local(1, started=False), now, DAY, now)
    assert state == "dead" and "first process" in why
    # with its recorded start time it is what it says: a cairn that is a container's init
    if procs.process_start(1) is not None:
        assert owner.check(local(1, started=True), now, DAY, now)[0] == "alive"


def test_a_marker_naming_pid_1_does_not_block_resume(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    path = state_root(repo) / "tickets" / "T-1" / ".in-progress.yaml"
    path.parent.mkdir(parents=True)
    now = clock.now().isoformat()
    path.write_text(
        f"phase: implement\nstarted_at: '{now}'\nlast_updated: '{now}'\n"
        f"owner:\n  host: {owner.this_host()}\n  pid: 1\n"
    )
    report = json.loads(cairn("catchup", "T-1", "--json", cwd=repo).stdout)
    assert (report["state"], report["owner_state"]) == ("interrupted", "dead")
    layout = Layout(state_root(repo))
    with lease.acquire(layout, "T-1", stale_after=DAY) as taken:
        assert taken.takeover is not None


def remote_marker(layout: Layout, ahead: timedelta) -> None:
    future = clock.now() + ahead
    layout.ticket_dir("T-1").mkdir(parents=True, exist_ok=True)
    marker.write(
        layout.marker_path("T-1"),
        marker.Marker(
            phase="implement",
            started_at=future,
            last_updated=future,
            ticket="T-1",
            owner=Owner(host="elsewhere.example", pid=4242, boot_id="b"),
        ),
    )


def test_a_remote_clock_ahead_counts_as_now_and_takeover_always_works(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "state")
    remote_marker(layout, timedelta(days=400))
    current = marker.read(layout.marker_path("T-1"))
    assert current is not None
    state, liveness, detail = marker.judge(current, DAY, clock.now())
    assert (state, liveness) == ("in_progress", "remote")
    assert "0s ago" in detail and "ahead" in detail
    with pytest.raises(BadInput, match="--takeover"):
        lease.acquire(layout, "T-1", stale_after=DAY)
    with lease.acquire(layout, "T-1", stale_after=DAY, takeover=True) as taken:
        assert taken.takeover is not None
        assert taken.warning is not None and "elsewhere.example" in taken.warning


def test_resume_takeover_of_a_remote_owner_with_a_clock_ahead(tmp_path: Path) -> None:
    """Through the real CLI: refused without ``--takeover``, taken over with it (and a warning)."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"coder": [[{"cairn": ["task", "done", "1"]}]]}))
    config = (
        f'[agent]\nkind = "scripted"\nscript = "{script}"\nmax_turns = 3\n'
        'budget_pressure_turns = 1\n\n[loop]\nphases = ["implement"]\n'
    )
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n", "cairn.toml": config})
    plan = tmp_path / "T-1.md"
    plan.write_text("### Task 1: One\n\nDo it.\n")
    layout = Layout(state_root(repo))
    first = cairn("run", str(plan), "--max-turns", "2", cwd=repo)
    assert first.returncode == 0, first.stderr
    run_id = json.loads(cairn("catchup", "T-1", "--json", cwd=repo).stdout)["run"]
    # the run is back in progress on another host whose clock is a year ahead
    future = clock.now() + timedelta(days=365)
    marker.write(
        layout.marker_path("T-1"),
        marker.Marker(
            phase="implement",
            started_at=future,
            last_updated=future,
            ticket="T-1",
            run=run_id,
            owner=Owner(host="elsewhere.example", pid=4242, boot_id="b"),
        ),
    )
    refused = cairn("resume", "T-1", cwd=repo)
    assert refused.returncode == 2 and "--takeover" in refused.stderr, refused.stderr
    taken = cairn("resume", "T-1", "--takeover", cwd=repo)
    assert "being run" not in taken.stderr, taken.stderr
    assert "elsewhere.example" in taken.stdout and "warning" in taken.stdout, taken.stdout
