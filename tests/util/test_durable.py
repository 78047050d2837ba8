"""durable: atomic replace, fsynced appends, capped reads, the short lock, stale temp cleanup."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cairn.errors import BadInput
from cairn.state import journal
from cairn.state.layout import JOURNAL
from cairn.util import durable
from helpers import dead_pid, fork_child, wait_ok


def temps(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(durable.TEMP_PREFIX))


# --- atomic_write -------------------------------------------------------------------------


def test_atomic_write_creates_and_replaces_without_leaving_temps(tmp_path: Path) -> None:
    target = tmp_path / "state.yaml"
    durable.atomic_write(target, "first\n")
    assert target.read_text() == "first\n"
    inode = target.stat().st_ino
    durable.atomic_write(target, b"second \xe2\x9c\x93\n")
    assert target.read_bytes() == b"second \xe2\x9c\x93\n"
    # replaced by rename: a new inode, never rewritten in place
    assert target.stat().st_ino != inode
    durable.atomic_write(target, "", fsync=False)
    assert target.read_bytes() == b""
    assert temps(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.yaml"]


def test_atomic_write_large_payload_is_complete(tmp_path: Path) -> None:
    target = tmp_path / "big"
    payload = os.urandom(3 * 1024 * 1024 + 17)
    durable.atomic_write(target, payload)
    assert target.read_bytes() == payload
    assert temps(tmp_path) == []


def test_atomic_write_replaces_symlink_not_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("do not touch\n")
    link = tmp_path / "marker.yaml"
    link.symlink_to(victim)
    durable.atomic_write(link, "new\n")
    assert not link.is_symlink()
    assert link.is_file()
    assert link.read_text() == "new\n"
    assert victim.read_text() == "do not touch\n"
    assert temps(tmp_path) == []


def test_atomic_write_dangling_symlink_is_replaced(tmp_path: Path) -> None:
    link = tmp_path / "marker.yaml"
    link.symlink_to(tmp_path / "nowhere")
    durable.atomic_write(link, "x\n")
    assert not link.is_symlink()
    assert link.read_text() == "x\n"
    assert not (tmp_path / "nowhere").exists()


def test_atomic_write_failure_midway_keeps_old_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state"
    durable.atomic_write(target, "old\n")
    real_write = os.write
    calls = []

    def failing_write(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:10]))  # a short write first
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", failing_write)
    with pytest.raises(OSError, match="No space"):
        durable.atomic_write(target, "n" * 1000)
    monkeypatch.undo()
    assert len(calls) == 2
    assert target.read_text() == "old\n"
    assert temps(tmp_path) == []


def test_atomic_write_failing_fsync_keeps_old_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state"
    durable.atomic_write(target, "old\n")

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output"):
        durable.atomic_write(target, "new\n")
    monkeypatch.undo()
    assert target.read_text() == "old\n"
    assert temps(tmp_path) == []


def test_atomic_write_bad_data_keeps_old_content(tmp_path: Path) -> None:
    target = tmp_path / "state"
    durable.atomic_write(target, "old\n")
    with pytest.raises(UnicodeEncodeError):
        durable.atomic_write(target, "lone surrogate \udcff")
    with pytest.raises(TypeError):
        durable.atomic_write(target, 12345)  # type: ignore[arg-type]
    assert target.read_text() == "old\n"
    assert temps(tmp_path) == []


def test_atomic_write_into_missing_directory_fails_cleanly(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        durable.atomic_write(tmp_path / "missing" / "state", "x")
    assert list(tmp_path.iterdir()) == []


def test_ensure_dir_creates_parents(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c"
    durable.ensure_dir(deep)
    assert deep.is_dir()
    durable.ensure_dir(deep)  # idempotent
    durable.atomic_write(deep / "f", "x")
    assert (deep / "f").read_text() == "x"


# --- append_line and the journal reader ---------------------------------------------------


def test_append_line_appends_records(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    durable.append_line(path, "one")
    durable.append_line(path, "two ✓")
    durable.append_line(path, "three", fsync=False)
    assert path.read_bytes() == "one\ntwo ✓\nthree\n".encode()


def test_append_line_fsyncs_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "log.jsonl"
    synced: list[int] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    durable.append_line(path, "one")
    assert synced == [path.stat().st_ino]
    synced.clear()
    durable.append_line(path, "two", fsync=False)
    assert synced == []


@pytest.mark.parametrize("line", ["a\nb", "\n", "trailing\n"])
def test_append_line_rejects_embedded_newline(tmp_path: Path, line: str) -> None:
    path = tmp_path / "log.jsonl"
    durable.append_line(path, "good")
    with pytest.raises(ValueError, match="one line"):
        durable.append_line(path, line)
    assert path.read_text() == "good\n"


def test_append_cuts_off_a_torn_last_line_so_no_warning_outlives_it(tmp_path: Path) -> None:
    """Defect 10: a torn last line used to stay in the journal for good, as a "line 3 is not a
    JSON event" warning on every catch-up; the next append now cuts it off."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    journal.record(run_dir, "run_started", ticket="T-1")
    journal.record(run_dir, "phase", phase="implement")
    path = run_dir / JOURNAL
    with open(path, "ab") as handle:  # a writer killed mid-line
        handle.write(b'{"t": "2026-01-01T00:00:00.000+00:00", "event": "ta')
    assert durable.torn_tail(path) == len(b'{"t": "2026-01-01T00:00:00.000+00:00", "event": "ta')

    events, warnings = journal.read(run_dir)
    assert [e["event"] for e in events] == ["run_started", "phase"]
    assert len(warnings) == 1
    assert "line 3" in warnings[0] and "torn" in warnings[0]
    assert journal.last(run_dir) == events[-1]

    journal.record(run_dir, "task", task=1)
    lines = path.read_bytes().split(b"\n")
    assert len(lines) == 4 and lines[3] == b""
    assert durable.torn_tail(path) == 0
    events, warnings = journal.read(run_dir)
    assert [e["event"] for e in events] == ["run_started", "phase", "task"]
    assert events[2]["task"] == 1
    assert warnings == []


def test_append_cuts_off_a_torn_line_longer_than_the_tail_chunk(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"event": "a"}\n' + b"x" * (200 * 1024))
    durable.append_line(path, '{"event": "b"}')
    assert path.read_bytes() == b'{"event": "a"}\n{"event": "b"}\n'
    path.write_bytes(b"y" * 70_000)  # torn before its first newline: nothing survives
    durable.append_line(path, '{"event": "c"}')
    assert path.read_bytes() == b'{"event": "c"}\n'


def test_append_to_empty_file_adds_no_blank_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"")
    durable.append_line(path, "x")
    assert path.read_bytes() == b"x\n"


# --- read_state_file / decode_text --------------------------------------------------------


def test_read_state_file_absent_is_none(tmp_path: Path) -> None:
    assert durable.read_state_file(tmp_path / "nope", "marker") is None


def test_read_state_file_reads_bytes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc\n")
    assert durable.read_state_file(path, "marker") == b"abc\n"


def test_read_state_file_symlink_is_bad_input(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.write_text("x")
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(BadInput, match="symlink") as info:
        durable.read_state_file(link, "marker")
    assert str(link) in str(info.value)
    assert "marker" in str(info.value)


def test_read_state_file_over_limit_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 101)
    with pytest.raises(BadInput, match="over the 100 byte limit"):
        durable.read_state_file(path, "marker", limit=100)
    path.write_bytes(b"x" * 100)
    assert durable.read_state_file(path, "marker", limit=100) == b"x" * 100


def test_read_state_file_fifo_is_bad_input_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="not a regular file"):
        durable.read_state_file(fifo, "marker")


def test_read_state_file_directory_is_bad_input(tmp_path: Path) -> None:
    directory = tmp_path / "dir"
    directory.mkdir()
    with pytest.raises(BadInput, match="not a regular file"):
        durable.read_state_file(directory, "marker")


def test_decode_text_rejects_binary_and_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert durable.decode_text("héllo\n".encode(), path, "marker") == "héllo\n"
    with pytest.raises(BadInput, match="binary"):
        durable.decode_text(b"abc\0def", path, "marker")
    with pytest.raises(BadInput, match=r"not UTF-8 text \(byte 3\)"):
        durable.decode_text(b"abc\xff\xfe", path, "marker")
    with pytest.raises(BadInput, match="not UTF-8"):
        durable.decode_text("é".encode("latin-1"), path, "marker")


# --- locked -------------------------------------------------------------------------------


def test_locked_serialises_two_processes(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    lock = tmp_path / ".lock"
    go_read, go_write = os.pipe()

    def worker() -> None:
        os.close(go_write)
        assert os.read(go_read, 1) == b"g"  # both start together
        for _ in range(200):
            with durable.locked(lock):
                value = int(counter.read_text())
                os.sched_yield()
                durable.atomic_write(counter, str(value + 1), fsync=False)

    children = [fork_child(worker), fork_child(worker)]
    os.close(go_read)
    os.write(go_write, b"gg")
    os.close(go_write)
    for pid in children:
        wait_ok(pid)
    assert counter.read_text() == "400"
    assert temps(tmp_path) == []


def test_locked_blocks_while_another_process_holds_it(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    held_r, held_w = os.pipe()
    release_r, release_w = os.pipe()

    def holder() -> None:
        os.close(held_r)
        os.close(release_w)
        with durable.locked(lock):
            os.write(held_w, b"h")
            os.read(release_r, 1)

    pid = fork_child(holder)
    os.close(held_w)
    os.close(release_r)
    try:
        assert os.read(held_r, 1) == b"h"
        import fcntl

        fd = os.open(lock, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        os.write(release_w, b"r")
        os.close(release_w)
        wait_ok(pid)
    with durable.locked(lock):  # free again once the holder left
        pass


# --- remove / remove_stale_temps ----------------------------------------------------------


def test_remove_reports_whether_it_deleted(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    assert durable.remove(path) is True
    assert not path.exists()
    assert durable.remove(path) is False


def test_remove_stale_temps_removes_dead_writers_only(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        gone = dead_pid()
        dead = tmp_path / f"{durable.TEMP_PREFIX}.in-progress.yaml.{gone}.0a1b2c3d"
        alive = tmp_path / f"{durable.TEMP_PREFIX}.in-progress.yaml.{sleeper.pid}.deadbeef"
        mine = tmp_path / f"{durable.TEMP_PREFIX}summary.md.{os.getpid()}.00112233"
        odd = tmp_path / f"{durable.TEMP_PREFIX}garbage"
        regular = tmp_path / ".in-progress.yaml"
        for path in (dead, alive, mine, odd, regular):
            path.write_text("x")
        durable.remove_stale_temps(tmp_path)
        assert not dead.exists()
        assert alive.exists()
        assert mine.exists()
        assert odd.exists()  # no pid in the name: left alone
        assert regular.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    durable.remove_stale_temps(tmp_path)
    assert not alive.exists()
    assert mine.exists()


def test_remove_stale_temps_missing_directory_is_fine(tmp_path: Path) -> None:
    durable.remove_stale_temps(tmp_path / "missing")
