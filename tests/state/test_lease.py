"""lease: one live run per ticket, with real processes racing, dying and reusing pids."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path

import msgspec
import psutil
import pytest

from cairn.errors import BadInput, LeaseBusy
from cairn.state import lease, marker, owner
from cairn.state.layout import Layout
from cairn.state.owner import Owner
from cairn.util import clock, procs
from helpers import dead_pid, fork_child, reap

DAY = 86400.0
FORK = multiprocessing.get_context("fork")


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return Layout(tmp_path / "state")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process on this host that is not the test."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        # the pid is there as soon as fork returns; wait for the exec to be sure
        deadline = time.monotonic() + 5
        while "sleep" not in psutil.Process(proc.pid).cmdline():
            assert time.monotonic() < deadline
            time.sleep(0.005)
        yield proc
    finally:
        proc.kill()
        proc.wait()


def live_owner(pid: int) -> Owner:
    """The owner record a cairn process with ``pid`` on this host would write."""
    recorded = owner.of(pid)
    assert recorded.pid_started_at is not None and recorded.pid_started_since_boot is not None
    return recorded


def put_marker(layout: Layout, ticket: str, who: Owner | None, age: float = 0.0) -> marker.Marker:
    updated = clock.now() - timedelta(seconds=age)
    m = marker.Marker(
        phase="implement",
        started_at=updated - timedelta(minutes=5),
        last_updated=updated,
        ticket=ticket,
        owner=who,
    )
    layout.ticket_dir(ticket).mkdir(parents=True, exist_ok=True)
    marker.write(layout.marker_path(ticket), m)
    return m


def read_line(fd: int) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 4096)
        assert chunk, "child closed its pipe early"
        data += chunk
    return data.decode().strip()


# --- (a) two processes race for one lease -------------------------------------------------


def _racer(conn: Connection, barrier: Barrier, root: str, tickets: list[str], hold: float) -> None:
    layout = Layout(Path(root))
    for ticket in tickets:
        barrier.wait(timeout=30)
        try:
            held = lease.acquire(layout, ticket, stale_after=DAY)
        except BadInput as exc:
            conn.send(("lose", type(exc).__name__, str(exc)))
            conn.recv()
        else:
            time.sleep(hold)
            conn.send(("win", "", ""))
            conn.recv()  # hold the lease until the parent saw both answers
            held.release()
        barrier.wait(timeout=30)


def race(layout: Layout, tickets: list[str], hold: float = 0.0) -> list[tuple[int, str]]:
    """Two processes try each ticket at the same instant; (winner pid, loser's message) each."""
    barrier = FORK.Barrier(2)
    ends, procs = [], []
    for _ in range(2):
        mine, theirs = FORK.Pipe()
        proc = FORK.Process(target=_racer, args=(theirs, barrier, str(layout.root), tickets, hold))
        proc.start()
        ends.append(mine)
        procs.append(proc)
    results = []
    try:
        for ticket in tickets:
            answers = []
            for end in ends:
                assert end.poll(30), f"no answer for {ticket}"
                answers.append(end.recv())
            winners = [i for i, answer in enumerate(answers) if answer[0] == "win"]
            assert len(winners) == 1, (ticket, answers)
            loser = answers[1 - winners[0]]
            assert loser[1] == "LeaseBusy", loser
            winner = procs[winners[0]].pid
            assert winner is not None
            results.append((winner, loser[2]))
            for end in ends:
                end.send("next")
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
    assert [proc.exitcode for proc in procs] == [0, 0]
    return results


def names_winner(message: str, winner: int) -> bool:
    return f"pid {winner} on {owner.this_host()}" in message or "another cairn process" in message


@pytest.mark.slow
def test_race_exactly_one_wins_each_round(layout: Layout) -> None:
    tickets = [f"T-{n}" for n in range(100)]
    results = race(layout, tickets, hold=0.05)
    for ticket, (winner, message) in zip(tickets, results, strict=True):
        assert f"ticket {ticket} is already being run by" in message
        assert names_winner(message, winner), (winner, message)
    # a released lease keeps no owner record that could be mistaken for a live holder
    for ticket in tickets:
        assert layout.lease_path(ticket).read_text() == ""


def test_race_on_one_ticket_never_names_a_stale_holder(layout: Layout) -> None:
    results = race(layout, ["T-1"] * 500)
    wrong = [(w, m) for w, m in results if not names_winner(m, w)]
    assert wrong == []


# --- (b) a live owner with a marker -------------------------------------------------------


def test_second_acquire_names_the_live_owner(layout: Layout) -> None:
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()

    def holder() -> None:
        os.close(ready_r)
        os.close(go_w)
        held = lease.acquire(layout, "T-1", stale_after=DAY)
        assert held.previous is None and held.takeover is None
        put_marker(layout, "T-1", owner.me())
        os.write(ready_w, b"held\n")
        read_line(go_r)  # "release"
        held.release()
        os.write(ready_w, b"released\n")
        read_line(go_r)  # "exit"

    pid = fork_child(holder)
    os.close(ready_w)
    os.close(go_r)
    host = owner.this_host()
    try:
        assert read_line(ready_r) == "held"
        recorded = marker.read(layout.marker_path("T-1"))
        assert recorded is not None and recorded.owner is not None
        assert recorded.owner.pid == pid
        # the lock is held: named from the marker
        with pytest.raises(LeaseBusy) as held_err:
            lease.acquire(layout, "T-1", stale_after=DAY)
        assert f"pid {pid} on {host}" in str(held_err.value)
        assert "already being run" in str(held_err.value)

        # the lock is free but the owner process is alive: still refused, by the marker
        os.write(go_w, b"release\n")
        assert read_line(ready_r) == "released"
        with pytest.raises(LeaseBusy) as alive_err:
            lease.acquire(layout, "T-1", stale_after=DAY, takeover=True)
        assert f"pid {pid} on {host} is running" in str(alive_err.value)
    finally:
        os.write(go_w, b"exit\n")
        os.close(go_w)
        assert reap(pid) == 0
    # and once it has exited, it is gone
    with lease.acquire(layout, "T-1", stale_after=DAY) as taken:
        assert taken.takeover is not None and "gone" in taken.takeover
        assert taken.previous is not None and taken.previous.owner is not None
        assert taken.previous.owner.pid == pid


def test_acquire_from_another_process_names_pid_and_host_via_cli_style_subprocess(
    layout: Layout,
) -> None:
    """The same as above across an exec boundary: a separate interpreter tries to acquire."""
    with lease.acquire(layout, "T-1", stale_after=DAY) as held:
        put_marker(layout, "T-1", held.me)
        code = (
            "import sys; from pathlib import Path\n"
            "from cairn.state import lease; from cairn.state.layout import Layout\n"
            "from cairn.errors import BadInput\n"
            "try:\n"
            f"    lease.acquire(Layout(Path({str(layout.root)!r})), 'T-1', stale_after=86400)\n"
            "except BadInput as exc:\n"
            "    print(exc); sys.exit(2)\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False
        )
    assert result.returncode == 2, result.stderr
    assert f"pid {os.getpid()} on {owner.this_host()}" in result.stdout


# --- (c) a dead owner on this host --------------------------------------------------------


def test_dead_owner_is_taken_over(layout: Layout) -> None:
    gone = dead_pid()
    previous = put_marker(
        layout,
        "T-1",
        Owner(
            host=owner.this_host(),
            pid=gone,
            pid_started_at=clock.now() - timedelta(seconds=3),
            boot_id=procs.boot_id(),
        ),
    )
    state, why = owner.check(previous.owner, previous.last_updated, DAY, clock.now())
    assert state == "dead" and "gone" in why
    with lease.acquire(layout, "T-1", stale_after=DAY) as taken:
        assert taken.takeover is not None
        assert "gone" in taken.takeover
        assert f"pid {gone}" in taken.takeover
        assert taken.previous == previous
        assert taken.me.pid == os.getpid()


def test_free_ticket_has_no_takeover(layout: Layout) -> None:
    with lease.acquire(layout, "T-1", stale_after=DAY) as taken:
        assert taken.previous is None
        assert taken.takeover is None
    put_marker(layout, "T-2", None)  # a hand-written marker without an owner
    with lease.acquire(layout, "T-2", stale_after=DAY) as taken:
        assert taken.previous is not None and taken.previous.owner is None
        assert taken.takeover is None


# --- (d) pid reuse -----------------------------------------------------------------------


def test_reused_pid_is_dead(layout: Layout, sleeper: subprocess.Popen[bytes]) -> None:
    """The record's process started an hour before the pid's, by both clocks."""
    real = live_owner(sleeper.pid)
    assert real.pid_started_at is not None and real.pid_started_since_boot is not None
    impostor = msgspec.structs.replace(
        real,
        pid_started_at=real.pid_started_at - timedelta(hours=1),
        pid_started_since_boot=real.pid_started_since_boot - 3600,
    )
    state, why = owner.check(impostor, clock.now(), DAY, clock.now())
    assert state == "dead"
    assert "another process" in why
    previous = put_marker(layout, "T-1", impostor)
    with lease.acquire(layout, "T-1", stale_after=DAY) as taken:
        assert taken.takeover is not None and "another process" in taken.takeover
        assert taken.previous == previous


def test_live_owner_with_right_start_time_is_refused(
    layout: Layout, sleeper: subprocess.Popen[bytes]
) -> None:
    real = live_owner(sleeper.pid)
    assert owner.check(real, clock.now(), DAY, clock.now())[0] == "alive"
    # within the tolerance is still the same process
    assert real.pid_started_at is not None
    near = msgspec.structs.replace(
        real, pid_started_at=real.pid_started_at + timedelta(seconds=0.5)
    )
    assert owner.check(near, clock.now(), DAY, clock.now())[0] == "alive"
    # an owner that recorded no start time cannot be judged reused
    unknown_start = msgspec.structs.replace(real, pid_started_at=None)
    assert owner.check(unknown_start, clock.now(), DAY, clock.now())[0] == "alive"
    put_marker(layout, "T-1", real, age=10 * DAY)  # age does not matter on this host
    for takeover in (False, True):
        with pytest.raises(BadInput) as err:
            lease.acquire(layout, "T-1", stale_after=DAY, takeover=takeover)
        assert f"pid {sleeper.pid} on {owner.this_host()}" in str(err.value)
    # refusing left the lease free
    sleeper.kill()
    sleeper.wait()
    with lease.acquire(layout, "T-1", stale_after=DAY) as taken:
        assert taken.takeover is not None and "gone" in taken.takeover


def test_process_start_matches_reality() -> None:
    before = datetime.now().astimezone()
    uptime = time.clock_gettime(time.CLOCK_BOOTTIME)
    proc = subprocess.Popen(["sleep", "5"])
    try:
        started = procs.process_start(proc.pid)
        assert started is not None and started.since_boot is not None
        assert abs((started.at - before).total_seconds()) < 3  # btime is whole seconds
        assert abs(started.since_boot - uptime) < 1  # ticks from boot: no clock in it
        mine = procs.process_start(os.getpid())
        assert mine is not None and mine.at < started.at
        assert mine.since_boot is not None and mine.since_boot < started.since_boot
    finally:
        proc.kill()
        proc.wait()
    assert procs.process_start(dead_pid()) is None


def test_a_step_of_the_clock_moves_the_start_time_but_not_the_start_since_boot(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """A machine restored from a snapshot sets its clock, and the kernel's boot time moves by
    as much. Read through a /proc whose boot time is an hour later (as the kernel shows it
    then), the process's start by the clock moves an hour and its start since boot does not:
    the owner recorded before the step is still alive, and a reused pid is still dead."""
    recorded = live_owner(sleeper.pid)
    with open("/proc/stat") as handle:
        lines = handle.read().splitlines()
    stepped = [
        f"btime {int(line.split()[1]) + 3600}" if line.startswith("btime ") else line
        for line in lines
    ]
    fake = tmp_path / "proc"
    fake.mkdir()
    (fake / "stat").write_text("\n".join(stepped) + "\n")
    for pid in (sleeper.pid, os.getpid()):
        (fake / str(pid)).symlink_to(f"/proc/{pid}")
    before = psutil.PROCFS_PATH
    psutil.PROCFS_PATH = str(fake)
    try:
        now = procs.process_start(sleeper.pid)
        assert now is not None and recorded.pid_started_at is not None
        assert abs((now.at - recorded.pid_started_at).total_seconds() - 3600) < 1
        assert now.since_boot == recorded.pid_started_since_boot
        assert owner.check(recorded, clock.now(), DAY, clock.now())[0] == "alive"
        since_boot = recorded.pid_started_since_boot
        assert since_boot is not None
        reused = msgspec.structs.replace(recorded, pid_started_since_boot=since_boot - 60)
        state, why = owner.check(reused, clock.now(), DAY, clock.now())
        assert state == "dead" and "another process" in why
    finally:
        psutil.PROCFS_PATH = before


# --- (e) a reboot -------------------------------------------------------------------------


def test_other_boot_id_is_dead(layout: Layout, sleeper: subprocess.Popen[bytes]) -> None:
    current = procs.boot_id()
    if current is None:
        pytest.skip("no boot id on this system")
    other = str(float(current) - 3600) if current.isdigit() else str(uuid.uuid4())
    before_reboot = msgspec.structs.replace(live_owner(sleeper.pid), boot_id=other)
    state, why = owner.check(before_reboot, clock.now(), DAY, clock.now())
    assert state == "dead" and "restarted" in why
    previous = put_marker(layout, "T-1", before_reboot)
    with lease.acquire(layout, "T-1", stale_after=DAY) as taken:
        assert taken.takeover is not None and "restarted" in taken.takeover
        assert taken.previous == previous


def test_boot_ids_are_compared_as_what_they_are() -> None:
    """The kernel's boot UUIDs are one boot when equal; boot times (systems without one) when a
    second or two apart, the kernel deriving them from the clock; a UUID and a time cannot be
    compared, and the start time tells instead."""
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    assert procs.same_boot(a, a) and not procs.same_boot(a, b)
    assert procs.same_boot("1796237601", "1796237602")
    assert not procs.same_boot("1796237601", "1796233001")
    assert procs.same_boot("1796237601", a) and procs.same_boot(a, "1796237601")


def test_the_boot_id_is_the_kernels_boot_uuid_on_linux() -> None:
    if not os.path.exists(procs.LINUX_BOOT_ID):
        pytest.skip("Linux only")
    with open(procs.LINUX_BOOT_ID) as handle:
        assert procs.boot_id() == handle.read().strip()


def old_linux_owner(pid: int) -> Owner:
    """An owner record as earlier releases wrote it on Linux: the kernel's boot UUID, and the
    start time as the boot time of /proc/stat plus the start ticks of /proc/<pid>/stat."""
    if not os.path.exists("/proc/sys/kernel/random/boot_id"):
        pytest.skip("earlier releases recorded owners this way on Linux only")
    with open("/proc/sys/kernel/random/boot_id") as handle:
        boot_uuid = handle.read().strip()
    with open("/proc/stat") as handle:
        btime = next(float(line.split()[1]) for line in handle if line.startswith("btime "))
    with open(f"/proc/{pid}/stat", "rb") as handle:
        raw = handle.read()
    ticks = int(raw[raw.rfind(b")") + 2 :].split()[19])
    seconds = round(btime + ticks / os.sysconf("SC_CLK_TCK"), 2)
    started = datetime.fromtimestamp(seconds).astimezone()
    return Owner(host=owner.this_host(), pid=pid, pid_started_at=started, boot_id=boot_uuid)


def test_an_owner_recorded_by_an_earlier_release_is_judged_alike(
    layout: Layout, sleeper: subprocess.Popen[bytes]
) -> None:
    """A live run's owner record from before boot ids were boot times is alive; the same
    record with the pid reused by another process is dead."""
    recorded = old_linux_owner(sleeper.pid)
    put_marker(layout, "T-1", recorded)
    read = marker.read(layout.marker_path("T-1"))
    assert read is not None and read.owner == recorded
    assert owner.check(read.owner, clock.now(), DAY, clock.now())[0] == "alive"
    started = recorded.pid_started_at
    now = procs.process_start(sleeper.pid)
    assert started is not None and now is not None and started == now.at
    reused = msgspec.structs.replace(recorded, pid_started_at=started - timedelta(minutes=5))
    state, why = owner.check(reused, clock.now(), DAY, clock.now())
    assert state == "dead" and "another process" in why
    with pytest.raises(LeaseBusy):
        lease.acquire(layout, "T-1", stale_after=DAY)


# --- (f) an owner on another host ---------------------------------------------------------


def remote(pid: int = 4242) -> Owner:
    return Owner(
        host="elsewhere.example",
        pid=pid,
        pid_started_at=clock.now() - timedelta(hours=2),
        boot_id="remote-boot",
    )


def test_remote_owner_recently_updated_is_refused_without_takeover(layout: Layout) -> None:
    put_marker(layout, "T-1", remote(), age=60)
    with pytest.raises(BadInput) as err:
        lease.acquire(layout, "T-1", stale_after=3600)
    message = str(err.value)
    assert "pid 4242 on elsewhere.example" in message
    assert "stale after 1h" in message
    assert "--takeover" in message
    # another host cannot be checked: --takeover always works, with a warning
    with lease.acquire(layout, "T-1", stale_after=3600, takeover=True) as taken:
        assert taken.takeover is not None and "updated it 1m ago" in taken.takeover
        assert taken.warning is not None and "elsewhere.example" in taken.warning


def test_remote_owner_past_stale_after_needs_takeover(layout: Layout) -> None:
    previous = put_marker(layout, "T-1", remote(), age=2 * 3600)
    with pytest.raises(BadInput) as err:
        lease.acquire(layout, "T-1", stale_after=3600)
    message = str(err.value)
    assert "stale owner" in message
    assert "pass --takeover" in message
    assert "pid 4242 on elsewhere.example" in message
    assert "2h" in message
    with lease.acquire(layout, "T-1", stale_after=3600, takeover=True) as taken:
        assert taken.takeover is not None
        assert "elsewhere.example" in taken.takeover and "not updated" in taken.takeover
        assert taken.previous == previous


def test_remote_staleness_uses_the_given_now(layout: Layout) -> None:
    previous = put_marker(layout, "T-1", remote(), age=0)
    later = previous.last_updated + timedelta(seconds=3601)
    with pytest.raises(BadInput, match="pass --takeover"):
        lease.acquire(layout, "T-1", stale_after=3600, now=later)
    with pytest.raises(BadInput, match="stale after"):
        lease.acquire(layout, "T-1", stale_after=3600, now=later - timedelta(seconds=2))


# --- (g) the lease file itself -------------------------------------------------------------


def test_lease_file_is_never_replaced(layout: Layout) -> None:
    with lease.acquire(layout, "T-1", stale_after=DAY) as first:
        path = layout.lease_path("T-1")
        assert first.path == path
        inode = path.stat().st_ino
    put_marker(layout, "T-1", Owner(host=owner.this_host(), pid=dead_pid()))
    with lease.acquire(layout, "T-1", stale_after=DAY) as second:
        assert second.takeover is not None
        assert path.stat().st_ino == inode

    # a holder in another process, killed: same file again
    def holder() -> None:
        lease.acquire(layout, "T-1", stale_after=DAY)
        time.sleep(60)

    pid = fork_child(holder)
    try:
        deadline = time.monotonic() + 10
        while f'"pid":{pid}' not in path.read_text():
            assert time.monotonic() < deadline, "child never took the lease"
            time.sleep(0.005)
    finally:
        os.kill(pid, signal.SIGKILL)
        assert reap(pid) == -signal.SIGKILL
    with lease.acquire(layout, "T-1", stale_after=DAY):
        assert path.stat().st_ino == inode
        assert sorted(p.name for p in layout.ticket_dir("T-1").iterdir()) == [
            ".in-progress.yaml",
            "lease",
        ]


def test_sigkilled_holder_frees_the_lease(layout: Layout) -> None:
    ready_r, ready_w = os.pipe()

    def holder() -> None:
        os.close(ready_r)
        held = lease.acquire(layout, "T-1", stale_after=DAY)
        put_marker(layout, "T-1", held.me)
        os.write(ready_w, b"held\n")
        time.sleep(60)

    pid = fork_child(holder)
    os.close(ready_w)
    try:
        assert read_line(ready_r) == "held"
        inode = layout.lease_path("T-1").stat().st_ino
        with pytest.raises(BadInput, match=f"pid {pid} on "):
            lease.acquire(layout, "T-1", stale_after=DAY)
    finally:
        os.kill(pid, signal.SIGKILL)
        assert reap(pid) == -signal.SIGKILL
        os.close(ready_r)
    with lease.acquire(layout, "T-1", stale_after=DAY) as taken:
        assert taken.takeover is not None and f"pid {pid}" in taken.takeover
        assert "gone" in taken.takeover
        assert layout.lease_path("T-1").stat().st_ino == inode
        recorded = msgspec.json.decode(layout.lease_path("T-1").read_text(), type=Owner)
        assert recorded.pid == os.getpid()


def test_held_lease_blocks_a_second_acquire_in_the_same_process(layout: Layout) -> None:
    held = lease.acquire(layout, "T-1", stale_after=DAY)
    with pytest.raises(BadInput, match="already being run"):
        lease.acquire(layout, "T-1", stale_after=DAY)
    held.release()
    held.release()  # idempotent
    with lease.acquire(layout, "T-1", stale_after=DAY) as again:
        assert again.fd is not None
    assert again.fd is None


# --- hand-written markers -----------------------------------------------------------------


def test_hand_written_owner_start_time_without_offset(
    layout: Layout, sleeper: subprocess.Popen[bytes]
) -> None:
    layout.ticket_dir("T-1").mkdir(parents=True)
    layout.marker_path("T-1").write_text(
        "skill: impl\nphase: implement\n"
        "started_at: 2026-01-01 10:00:00\nlast_updated: 2026-01-01 10:00:00\n"
        f"owner:\n  host: {owner.this_host()}\n  pid: {sleeper.pid}\n"
        "  pid_started_at: 2000-01-01 09:00:00\n"
    )
    with lease.acquire(layout, "T-1", stale_after=DAY) as taken:
        assert taken.takeover is not None and "another process" in taken.takeover
