"""The status rows of settled tickets kept between ``cairn status`` calls
(``cairn.state.rowcache``): whatever happens to the run state between two calls, the rows are
those a call without the cache finds. Real files in a real repository; the racy window is set
to 0 where a test cannot wait two seconds, and every step waits out the filesystem's timestamp
tick."""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.state import marker, rowcache, status
from cairn.state.layout import discover, run_sort_key
from cairn.util import clock
from cairn.util.durations import parse_duration
from helpers import fresh_repo

TICK = 0.01  # longer than the kernel's timestamp tick
RUNS = ["20260101-000000Z", "20260102-000000Z", "20260102-000000Z-2"]
MARKER = """\
version: 1
phase: implement
round: 1
task: {task}
started_at: '2026-12-01T18:57:17+00:00'
last_updated: '2026-12-01T19:39:17+00:00'
run: {run}
"""


def summary(line: str, cost: float | None = None) -> str:
    usage = "" if cost is None else f"usage:\n  input_tokens: 12\n  cost_usd: {cost}\n"
    return f"---\nformat: 1\nticket: T\n{usage}---\n# Change summary\n\n## Status\n{line}\n"


def tickets_dir(repo: Path) -> Path:
    return repo / ".git" / "cairn" / "tickets"


def uncached(repo: Path) -> list[status.StatusRow]:
    """The rows a call finds with no cache at all (``ticket_row`` without one)."""
    _, config, layout = discover(repo)
    now = clock.now()
    stale_after = parse_duration(config.marker.stale_after)
    rows = []
    for ticket in layout.list_tickets():
        row, _ = status.ticket_row(str(layout.tickets_dir / ticket), ticket, stale_after, now)
        if row is not None:
            rows.append(row)
    return rows


def comparable(rows: list[status.StatusRow]) -> list[dict[str, object]]:
    """Rows without their age, which moves between two calls."""
    return [{**msgspec.structs.asdict(row), "age_seconds": None} for row in rows]


@pytest.fixture
def no_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rowcache, "RACY_WINDOW_NS", 0)


def cache_file(repo: Path) -> Path:
    return repo / ".git" / "cairn" / "cache" / rowcache.NAME


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def settle(repo: Path) -> None:
    (tickets_dir(repo) / "T-1").mkdir(parents=True)
    write(
        tickets_dir(repo) / "T-1" / RUNS[0] / "01_coder_change-summary.md",
        summary("Completed — 3 of 3 tasks", 0.5),
    )
    write(
        tickets_dir(repo) / "T-2" / RUNS[0] / "01_coder_change-summary.md",
        summary("Interrupted after task 1 of 4"),
    )
    (tickets_dir(repo) / "T-3").mkdir()  # a lease only, no run
    write(tickets_dir(repo) / "T-3" / "lease", "owner\n")
    time.sleep(TICK)


def test_settled_tickets_are_read_from_the_cache(repo: Path, no_window: None) -> None:
    settle(repo)
    first = status.status(repo)
    kept = json.loads(cache_file(repo).read_text())
    assert sorted(kept["tickets"]) == ["T-1", "T-2", "T-3"]
    touched: list[str] = []
    real_open, real_listdir = os.open, os.listdir

    def counting_open(path: str, *args: object, **kwargs: object) -> int:
        touched.append(os.fspath(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    def counting_listdir(path: str = ".") -> list[str]:
        touched.append(os.fspath(path))
        return real_listdir(path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "open", counting_open)
        patch.setattr(os, "listdir", counting_listdir)
        again = status.status(repo)
    assert not [p for p in touched if str(tickets_dir(repo)) in p]  # nothing listed or read
    assert comparable(again) == comparable(first) == comparable(uncached(repo))
    assert again[0].usage is not None and again[0].usage["cost_usd"] == 0.5


def test_a_marker_is_read_once_and_its_row_judged_at_every_call(
    repo: Path, no_window: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ticket with a marker keeps the marker in the cache: the next call reads no file of
    it, and still judges its row then (its age, its state)."""
    settle(repo)
    written = clock.now().replace(microsecond=0)
    text = MARKER.format(task=2, run=RUNS[0]).replace("2026-12-01T19:39:17+00:00", str(written))
    write(tickets_dir(repo) / "T-1" / ".in-progress.yaml", text)
    time.sleep(TICK)
    (first,) = [r for r in status.status(repo) if r.ticket == "T-1"]
    assert (first.state, first.task, first.run) == ("interrupted", 2, RUNS[0])
    reads: list[Path] = []
    real_read = marker.read

    def counting_read(path: Path) -> marker.Marker | None:
        reads.append(path)
        return real_read(path)

    monkeypatch.setattr(marker, "read", counting_read)
    later = written + timedelta(days=2)
    monkeypatch.setattr(clock, "now", lambda: later)
    again = status.status(repo)
    assert reads == []
    (row,) = [r for r in again if r.ticket == "T-1"]
    assert (row.state, row.age_seconds) == ("stale", 2 * 86400)
    assert comparable(again) == comparable(uncached(repo)) and len(reads) == 1


def test_a_kept_marker_not_in_shape_is_read_again(repo: Path, no_window: None) -> None:
    settle(repo)
    write(tickets_dir(repo) / "T-1" / ".in-progress.yaml", MARKER.format(task=3, run=RUNS[0]))
    time.sleep(TICK)
    status.status(repo)
    kept = json.loads(cache_file(repo).read_text())
    assert kept["tickets"]["T-1"][2][4]["task"] == 3  # the marker, as its record's builtins
    kept["tickets"]["T-1"][2][4]["task"] = "three"
    cache_file(repo).write_text(json.dumps(kept))
    (row,) = [r for r in status.status(repo) if r.ticket == "T-1"]
    assert row.task == 3


def test_a_just_written_summary_is_not_kept(repo: Path) -> None:
    settle(repo)  # the real two-second window: every file is newer than that
    status.status(repo)
    assert not cache_file(repo).exists()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{",
        b"[]",
        b'{"format": 0}',
        b'{"format": 1, "version": "0.0.0", "tickets": {}}',
        b"\xff",
    ],
)
def test_a_corrupt_or_old_cache_is_ignored_and_replaced(
    repo: Path, no_window: None, content: bytes
) -> None:
    settle(repo)
    status.status(repo)
    cache_file(repo).write_bytes(content)
    assert comparable(status.status(repo)) == comparable(uncached(repo))
    assert sorted(json.loads(cache_file(repo).read_text())["tickets"]) == ["T-1", "T-2", "T-3"]


def test_nothing_is_written_without_run_state(repo: Path) -> None:
    assert status.status(repo) == []
    assert not (repo / ".git" / "cairn").exists()


def test_an_entry_that_lies_about_its_files_is_not_believed(repo: Path, no_window: None) -> None:
    """A cache naming other stat data (a file edited in place, a moved directory) is a miss."""
    settle(repo)
    status.status(repo)
    path = tickets_dir(repo) / "T-1" / RUNS[0] / "01_coder_change-summary.md"
    before = path.stat()
    path.write_text(summary("Interrupted after task 2 of 3"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # only ctime and size tell
    (row,) = [r for r in status.status(repo) if r.ticket == "T-1"]
    assert (row.state, row.task) == ("interrupted", 2)


# --- the property: the cache never changes a row -------------------------------------------------

TICKETS = ["T-1", "T-2", "T-3"]
OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "summary",
                "next summary",
                "edit in place",
                "marker",
                "unmarker",
                "new run",
                "remove ticket",
                "remove run",
                "status",
            ]
        ),
        st.sampled_from(TICKETS),
        st.integers(0, 4),
    ),
    min_size=1,
    max_size=10,
)


def latest_run(ticket: Path) -> Path:
    runs = (
        sorted((p for p in ticket.iterdir() if p.is_dir()), key=lambda p: run_sort_key(p.name))
        if ticket.is_dir()
        else []
    )
    return runs[-1] if runs else ticket / RUNS[0]


def apply(repo: Path, op: str, ticket: str, n: int) -> None:
    here = tickets_dir(repo) / ticket
    run = latest_run(here)
    lines = [
        "Completed — 3 of 3 tasks",
        f"Interrupted after task {n} of 4",
        f"Running: task {n} of 5",
        "3 of 4 tasks done",
        "nothing",
    ]
    if op == "summary":
        write(run / "01_coder_change-summary.md", summary(lines[n], n / 10 if n % 2 else None))
    elif op == "next summary":
        write(run / f"{n + 2:02d}_coder_change-summary.md", summary(lines[(n + 1) % 5]))
    elif op == "edit in place" and (run / "01_coder_change-summary.md").is_file():
        path = run / "01_coder_change-summary.md"
        st_ = path.stat()
        with open(path, "r+") as handle:
            handle.write(summary(lines[n])[: st_.st_size].ljust(st_.st_size))
        os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns))
    elif op == "marker":
        write(here / ".in-progress.yaml", MARKER.format(task=n, run=run.name))
    elif op == "unmarker" and (here / ".in-progress.yaml").exists():
        (here / ".in-progress.yaml").unlink()
    elif op == "new run":
        (here / RUNS[min(n, 2)]).mkdir(parents=True, exist_ok=True)
    elif op == "remove ticket":
        shutil.rmtree(here, ignore_errors=True)
    elif op == "remove run" and run.is_dir():
        shutil.rmtree(run)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_the_cache_never_changes_a_row(ops: list[tuple[str, str, int]]) -> None:
    """After every step, ``cairn status`` (which reads and keeps the cache) gives the rows a
    call without it gives."""
    with pytest.MonkeyPatch.context() as patch, fresh_repo("cairn-rowcache-") as repo:
        patch.setattr(rowcache, "RACY_WINDOW_NS", 0)
        for op, ticket, n in ops:
            apply(repo, op, ticket, n)
            time.sleep(TICK)
            assert comparable(status.status(repo)) == comparable(uncached(repo)), op
