"""The heartbeat's quick touch of a marker (``cairn.state.touch``): it writes exactly the bytes
the full heartbeat writes, and leaves to it (None) every case it cannot be sure of. Real git,
real files; the clock is fixed so that both paths stamp the same second."""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from cairn.integrations import claude_hooks
from cairn.state import marker, runstate, touch
from cairn.state.layout import discover
from cairn.state.owner import Owner
from cairn.util import clock
from helpers import begin_run, git, write

LATER = datetime.fromisoformat("2031-05-06T07:08:09+02:00")


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> datetime:
    monkeypatch.setattr(clock, "now", lambda: LATER)
    return LATER


def interrupted(repo: Path, ticket: str = "main") -> Path:
    """An interrupted run's marker, last updated an hour before the (fixed) clock."""
    ref, lease = begin_run(repo, ticket, ["One", "Two"])
    runstate.interrupt(ref, lease, "signal")
    _, _, layout = discover(repo)
    path = layout.marker_path(ticket)
    current = marker.read(path)
    assert current is not None
    earlier = clock.now() - timedelta(hours=1)
    marker.write(path, msgspec.structs.replace(current, last_updated=earlier))
    return path


def beat(repo: Path) -> bool:
    return claude_hooks.heartbeat({"cwd": str(repo)}, {})


def memo(repo: Path, ticket: str = "main") -> Path:
    return repo / ".git" / "cairn" / "cache" / f"heartbeat-{ticket}"


def test_a_marker_cairn_wrote_is_touched_quickly_and_the_same_second_not_again(
    repo: Path, fixed_clock: datetime
) -> None:
    path = interrupted(repo)  # a transition wrote it, and kept its digest
    before = marker.read(path)
    assert before is not None and memo(repo).is_file()
    assert touch.touch(str(repo)) is True
    assert path.read_text() == marker.render(msgspec.structs.replace(before, last_updated=LATER))
    touched = path.read_text()
    assert touch.touch(str(repo)) is True  # the same second: nothing to write
    assert path.read_text() == touched


def test_without_its_digest_the_full_heartbeat_validates_and_keeps_one(
    repo: Path, fixed_clock: datetime
) -> None:
    path = interrupted(repo)
    memo(repo).unlink()
    assert touch.touch(str(repo)) is None
    assert beat(repo) and memo(repo).is_file()  # the full heartbeat, which keeps its digest
    again = marker.read(path)
    assert again is not None and again.last_updated == LATER


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"task": 3, "round": 2},
        {"task": None, "round": None, "dispatch": None, "snapshot": None},
        {"owner": Owner(host="build-7", pid=4242, boot_id="b")},
        {"phase": "review: round 2"},
    ],
)
def test_the_quick_touch_writes_what_the_full_heartbeat_writes(
    repo: Path, tmp_path: Path, fixed_clock: datetime, changes: dict[str, object]
) -> None:
    path = interrupted(repo)
    current = marker.read(path)
    assert current is not None
    shaped = msgspec.structs.replace(
        current, **{"last_updated": LATER - timedelta(hours=1), **changes}
    )
    text = marker.render(shaped)
    path.write_text(text)
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, symlinks=True)
    touch.remember(str(repo / ".git" / "cairn"), "main", text)
    quick = touch.touch(str(repo))
    assert beat(copy)  # no digest there: the full heartbeat
    if quick is None:  # a shape the quick path leaves to the full one: it said so, wrote nothing
        assert path.read_text() == text
        return
    assert quick is True
    assert path.read_bytes() == (copy / path.relative_to(repo)).read_bytes()


def test_a_marker_rewritten_since_is_left_to_the_full_heartbeat(
    repo: Path, fixed_clock: datetime
) -> None:
    path = interrupted(repo)
    assert beat(repo)
    text = path.read_text()
    path.write_text(
        text.replace("round: null\n", "round: -1\n") if "round:" in text else text + "round: -1\n"
    )
    assert touch.touch(str(repo)) is None
    with pytest.raises(Exception, match="marker"):
        beat(repo)  # the full path validates it, as before


@pytest.mark.parametrize(
    "setup",
    ["cairn.toml", "pyproject with cairn", "symlinked state root", "branches.json", "garbage memo"],
)
def test_what_the_quick_touch_leaves_to_the_full_heartbeat(
    repo: Path, tmp_path: Path, fixed_clock: datetime, setup: str
) -> None:
    path = interrupted(repo)
    assert beat(repo)
    before = path.read_bytes()
    path.write_text(before.decode().replace(LATER.isoformat(), "2030-01-01T00:00:00+00:00"))
    touch.remember(str(repo / ".git" / "cairn"), "main", path.read_text())
    if setup == "cairn.toml":
        write(repo, "cairn.toml", "[marker]\nstale_after = '2h'\n")
    elif setup == "pyproject with cairn":
        write(repo, "pyproject.toml", "[tool.cairn.marker]\nstale_after = '2h'\n")
    elif setup == "symlinked state root":
        real = tmp_path / "elsewhere"
        shutil.move(repo / ".git" / "cairn", real)
        (repo / ".git" / "cairn").symlink_to(real)
    elif setup == "branches.json":
        path.unlink()
        write(repo, ".git/cairn/branches.json", '{"main": ["other"]}\n')
    else:
        memo(repo).write_bytes(b"\xff\xfe not a digest")
    assert touch.touch(str(repo)) is None


def test_pyproject_without_cairn_and_no_state_at_all(repo: Path, fixed_clock: datetime) -> None:
    write(repo, "pyproject.toml", "[project]\nname = 'x'\n")
    assert touch.touch(str(repo)) is False  # no state root: no marker
    assert not (repo / ".git" / "cairn").exists()
    path = interrupted(repo)
    assert beat(repo)
    path.write_text(path.read_text().replace(LATER.isoformat(), "2030-01-01T00:00:00+00:00"))
    touch.remember(str(repo / ".git" / "cairn"), "main", path.read_text())
    assert touch.touch(str(repo)) is True
    git(repo, "checkout", "-q", "-b", "elsewhere")
    assert touch.touch(str(repo)) is False  # that branch's ticket has no marker


def test_the_command_line_touches_without_typing_pathlib_or_records(repo: Path) -> None:
    path = interrupted(repo)
    payload = f'{{"cwd": "{repo}"}}'.encode()
    probe = (
        "import os, sys\n"
        "real = os._exit\n"
        "def leave(code):\n"
        "    heavy = ('typing', 'pathlib', 'msgspec', 'cairn.config')\n"
        "    sys.stdout.write(repr([m for m in heavy if m in sys.modules]))\n"
        "    sys.stdout.flush()\n"
        "    real(code)\n"
        "os._exit = leave\n"
        "sys.argv = ['cairn', 'hook', 'claude', 'heartbeat']\n"
        "from cairn.cli.main import main\n"
        "main()\n"
    )
    memo(repo).unlink()  # a marker it cannot vouch for: the full path
    first = subprocess.run([sys.executable, "-c", probe], input=payload, capture_output=True)
    assert first.stdout != b"[]"
    assert memo(repo).is_file()
    lines = path.read_text().splitlines(keepends=True)
    text = "".join(
        "last_updated: '2020-01-01T00:00:00+00:00'\n" if line.startswith("last_updated:") else line
        for line in lines
    )
    path.write_text(text)
    touch.remember(str(repo / ".git" / "cairn"), "main", text)
    second = subprocess.run([sys.executable, "-c", probe], input=payload, capture_output=True)
    assert second.stdout == b"[]", second.stderr
    assert path.read_text() != text and "last_updated: '2020" not in path.read_text()


def test_nothing_started_is_left_behind_in_the_process(repo: Path, fixed_clock: datetime) -> None:
    """The discovery the quick touch started is read, or handed to the full heartbeat, which
    reads it: none stays for a later caller in a long-lived process to take stale."""
    from cairn.git import status

    path = interrupted(repo)
    memo(repo).unlink()
    assert touch.touch(str(repo)) is None and not status._early
    assert beat(repo) and not status._early  # the full path took what it was handed
    assert touch.touch(str(repo)) is True and not status._early
    path.unlink()
    assert beat(repo) is False and not status._early
