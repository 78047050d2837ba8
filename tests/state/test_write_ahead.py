"""The journal is the write-ahead record: writers killed between their journal event and their
files leave files that the next writer, or catch-up, brings up to the journal.

Issue 12, defects 9 (stale temps never removed), 10 (a torn journal line outlives the next
append) and 11 (marker, summary and journal not updated together). Every writer here is a real
process killed with a real SIGKILL at a chosen write: just before its Nth state write (a journal
append or an atomic replace), or between a replace's temp file and its rename.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn import summary
from cairn.run import evaluation, review
from cairn.run.progress import catch_up_evaluation
from cairn.state import journal, marker
from cairn.state.layout import JOURNAL
from cairn.state.runstate import RunRef, write_artifact
from cairn.terms import ENV_RUN_DIR
from cairn.util import durable
from helpers import assert_one_line_error, begin_run, cairn, untouched_state

TITLES = ["Parse", "Wire", "Docs"]

# A child that runs one progress report and SIGKILLs itself just before its Nth write step:
# a temp file staged, the journal appended, a temp renamed over its target. A report that
# changes the summary and the marker takes five: stage summary, stage marker, append, rename
# summary, rename marker.
KILLED_WRITER = r"""
import os, signal, sys
from pathlib import Path
from cairn.run import progress
from cairn.state.layout import Layout
from cairn.state.runstate import RunRef
from cairn.util import durable

run_dir, kill_at, op, *args = sys.argv[1:]
kill_at = int(kill_at)
steps = 0

def die_at_step(real):
    def wrapper(*a, **k):
        global steps
        steps += 1
        if steps == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **k)
    return wrapper

durable.stage = die_at_step(durable.stage)
durable.append_line = die_at_step(durable.append_line)
os.replace = die_at_step(os.replace)
layout, ticket, run_id = Layout.from_run_dir(Path(run_dir))
ref = RunRef(layout, ticket, run_id)
numbers = [int(a) for a in args if a.isdigit()]
if op == "done":
    progress.task_done(ref, numbers[0], files=["src/a.py"], outcome="done")
elif op == "start":
    progress.task_start(ref, numbers[0])
elif op == "defer":
    progress.defer_item(ref, "later")
elif op == "finding-add":
    progress.add_finding(ref, args[0], "A title", "src/a.py:3", None)
elif op == "ac":
    progress.record_ac(ref, args[0], "fail", "it does not")
sys.exit(0)
"""
STEPS = 5


@pytest.fixture
def run(repo: Path) -> Iterator[RunRef]:
    ref, lease = begin_run(repo, "T-1", TITLES)
    yield ref
    lease.release()


def killed_writer(ref: Any, kill_at: int, op: str, *args: str) -> int:
    """Run one report in a child killed at its ``kill_at``-th write step; its exit status."""
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(ref.run_dir), str(kill_at), op, *args],
        capture_output=True,
        check=False,
    )
    return proc.returncode


def journal_says(ref: Any) -> dict[int, str]:
    """Each task's status as the journal's task events say it, in order."""
    events, _ = journal.read(ref.run_dir)
    said = {n: "pending" for n in range(len(TITLES))}
    for event in events:
        if event["event"] == "task":
            said[event["task"]] = event["status"]
    return said


def summary_says(ref: Any) -> dict[int, str]:
    loaded = summary.load(ref.summary_path())
    assert loaded is not None
    return {t.number: t.status for t in loaded.tasks}


def temps(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(durable.TEMP_PREFIX))


@pytest.mark.parametrize("kill_at", range(1, STEPS + 1))
def test_a_writer_killed_at_any_write_leaves_files_the_journal_explains(
    run: Any, repo: Path, kill_at: int
) -> None:
    """Before the fix the summary was written first and the journal last: a kill in between
    left a completed task that no journal event recorded."""
    assert killed_writer(run, kill_at, "done", "0") == -signal.SIGKILL
    caught = cairn("catchup", "T-1", "--json", cwd=repo)
    assert caught.returncode == 0, caught.stderr
    assert summary_says(run) == journal_says(run)
    report = json.loads(caught.stdout)
    assert report["warnings"] == []
    said = journal_says(run)[0]
    assert report["items"][0]["status"] == said
    current = marker.read(run.marker_path)
    assert current is not None
    assert current.task == (1 if said == "completed" else None)


def test_the_next_writer_repairs_a_lagging_summary_before_adding_its_own_event(
    run: Any, repo: Path
) -> None:
    """Killed after its journal event, before the summary: ``task done 0`` is in the journal
    only. The next report (a real ``cairn task start 1``) applies it first."""
    assert killed_writer(run, 4, "done", "0") == -signal.SIGKILL
    assert journal_says(run)[0] == "completed"
    assert summary_says(run)[0] == "pending"
    started = cairn("task", "start", "1", env={ENV_RUN_DIR: str(run.run_dir)}, cwd=repo)
    assert started.returncode == 0, started.stderr
    assert summary_says(run) == {0: "completed", 1: "in progress", 2: "pending"}
    loaded = summary.load(run.summary_path())
    assert loaded is not None and loaded.tasks[0].files == ["src/a.py"]
    assert loaded.tasks[0].outcome == "done"
    assert [e["event"] for e in journal.read(run.run_dir)[0]][-2:] == ["task", "task"]


def test_a_lagging_event_is_applied_once(run: Any, repo: Path) -> None:
    """A deferred item (an append, not idempotent) whose writer died after the journal:
    repaired once by catch-up, and not again by the next writer."""
    assert killed_writer(run, 4, "defer") == -signal.SIGKILL
    assert cairn("catchup", "T-1", cwd=repo).returncode == 0
    assert cairn("catchup", "T-1", cwd=repo).returncode == 0
    env = {ENV_RUN_DIR: str(run.run_dir)}
    assert cairn("task", "start", "0", env=env, cwd=repo).returncode == 0
    loaded = summary.load(run.summary_path())
    assert loaded is not None and loaded.deferred == ["later"]


def test_catchup_writes_nothing_when_the_files_are_up_to_date(run: Any, repo: Path) -> None:
    env = {ENV_RUN_DIR: str(run.run_dir)}
    assert cairn("task", "start", "0", env=env, cwd=repo).returncode == 0
    root = run.layout.root
    before = sorted((str(p), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file())
    assert cairn("catchup", "T-1", cwd=repo).returncode == 0
    after = sorted((str(p), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file())
    assert after == before


def test_a_lagging_marker_is_repaired_from_the_journal(run: Any, repo: Path) -> None:
    """The orchestrator journals a phase, then dies before the marker says so."""
    journal.record(run.run_dir, "phase", phase="review", round=2)
    found = marker.read(run.marker_path)
    assert found is not None and found.phase == "implement"
    assert cairn("catchup", "T-1", cwd=repo).returncode == 0
    current = marker.read(run.marker_path)
    assert current is not None and (current.phase, current.round) == ("review", 2)


def test_a_finished_run_whose_marker_outlived_it_is_not_resumable(run: Any, repo: Path) -> None:
    """Killed between ``run_finished`` and removing the marker: the marker's dead owner would
    have made catch-up call the finished run interrupted, and resume run it again."""
    for n in range(len(TITLES)):
        assert cairn("task", "done", str(n), env={ENV_RUN_DIR: str(run.run_dir)}).returncode == 0
    journal.record(run.run_dir, "run_finished", status="completed")
    caught = cairn("catchup", "T-1", "--json", cwd=repo)
    assert json.loads(caught.stdout)["state"] == "done", caught.stdout
    assert not run.marker_path.exists()


@pytest.mark.parametrize("kill_at", [2, 5], ids=["summary", "marker"])
def test_temps_of_killed_writers_are_swept_by_the_next_writer(
    run: Any, repo: Path, kill_at: int
) -> None:
    """Defect 9: a writer killed between a temp file and its rename left the temp for good
    (``remove_stale_temps`` had no caller)."""
    assert killed_writer(run, kill_at, "done", "0") == -signal.SIGKILL
    left = temps(run.run_dir) + temps(run.run_dir.parent)
    assert len(left) == 1, left
    assert cairn("status", cwd=repo).returncode == 0  # a reader leaves them
    assert temps(run.run_dir) + temps(run.run_dir.parent) == left
    env = {ENV_RUN_DIR: str(run.run_dir)}
    assert cairn("task", "start", "2", env=env, cwd=repo).returncode == 0
    assert temps(run.run_dir) == [] and temps(run.run_dir.parent) == []
    assert summary_says(run) == journal_says(run)


def test_a_live_writers_temp_is_left_alone(run: Any, repo: Path) -> None:
    live = run.run_dir / f"{durable.TEMP_PREFIX}x.md.{os.getpid()}.abcd1234"
    live.write_text("mid-write")
    env = {ENV_RUN_DIR: str(run.run_dir)}
    assert cairn("task", "start", "0", env=env, cwd=repo).returncode == 0
    assert live.exists()


def test_a_torn_journal_line_is_cut_off_by_the_next_report(run: Any, repo: Path) -> None:
    """Defect 10: after the next append, a torn line became a permanent "line N is not a JSON
    event; skipped" warning on every catch-up."""
    path = run.run_dir / JOURNAL
    with open(path, "ab") as handle:  # a writer killed mid-line
        handle.write(b'{"t": "2026-01-01T00:00:00.000+00:00", "event": "ta')
    torn = json.loads(cairn("catchup", "T-1", "--json", cwd=repo).stdout)["warnings"]
    assert len(torn) == 1 and "torn" in torn[0]
    env = {ENV_RUN_DIR: str(run.run_dir)}
    assert cairn("task", "start", "0", env=env, cwd=repo).returncode == 0
    assert cairn("task", "done", "0", env=env, cwd=repo).returncode == 0
    report = json.loads(cairn("catchup", "T-1", "--json", cwd=repo).stdout)
    assert report["warnings"] == []
    assert all(line for line in path.read_bytes().split(b"\n")[:-1])
    assert [e["event"] for e in journal.read(run.run_dir)[0]] == ["run_started", "task", "task"]


def test_random_kills_of_reports_never_leave_the_summary_ahead_of_the_journal(
    run: Any, repo: Path
) -> None:
    """Real SIGKILLs at random instants of real ``cairn task`` processes: after each kill and
    a catch-up, the summary says exactly what the journal says."""
    import random
    import time

    rng = random.Random(12)
    env = {**os.environ, ENV_RUN_DIR: str(run.run_dir)}
    for attempt in range(12):
        n = attempt % len(TITLES)
        args = ["task", "start", str(n)] if attempt % 2 else ["task", "done", str(n)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "cairn", *args],
            cwd=repo,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert cairn("catchup", "T-1", cwd=repo).returncode == 0
        assert summary_says(run) == journal_says(run), attempt


def chattr(flag: str, *paths: Path) -> None:
    try:
        done = subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True, check=False)
    except OSError as exc:  # no chattr program
        pytest.skip(f"read-only cases need chattr +i (root): {exc}")
    if done.returncode != 0:
        pytest.skip(f"chattr {flag} is not available here: {done.stderr.decode().strip()}")


@pytest.mark.parametrize("what", ["summary", "marker", "journal", "run-dir", "ticket-dir"])
def test_a_report_that_cannot_write_all_its_files_writes_none(
    run: Any, repo: Path, what: str
) -> None:
    """An immutable file or directory (the tests run as root, so read-only is chattr +i):
    the report fails before its journal event, so the journal never records a change the
    files could not take."""
    target = {
        "summary": run.summary_path(),
        "marker": run.marker_path,
        "journal": run.run_dir / JOURNAL,
        "run-dir": run.run_dir,
        "ticket-dir": run.run_dir.parent,
    }[what]
    env = {ENV_RUN_DIR: str(run.run_dir)}
    before = untouched_state(repo)
    chattr("+i", target)
    try:
        result = cairn("task", "start", "0", env=env, cwd=repo)
        assert_one_line_error(result, code=1)
        assert "read-only" in result.stderr or "not permitted" in result.stderr
    finally:
        chattr("-i", target)
    assert untouched_state(repo) == before
    assert cairn("task", "start", "0", env=env, cwd=repo).returncode == 0


@pytest.mark.parametrize("kill_at", [1, 2, 3])
def test_a_killed_finding_add_leaves_the_review_behind_the_journal_never_ahead(
    run: Any, repo: Path, kill_at: int
) -> None:
    """The review, like the summary, never records a finding the journal does not; one the
    journal has is added by the next writer of the review (stage, append, rename: 3 steps)."""
    path = write_artifact(
        run, "reviewer", "review", review.render(review.Review(ticket="T-1", round=1))
    )
    assert killed_writer(run, kill_at, "finding-add", "F1") == -signal.SIGKILL
    journalled = [e["finding"] for e in journal.read(run.run_dir)[0] if e["event"] == "finding"]
    assert [f.id for f in review.load(path).findings] in ([], journalled)
    env = {ENV_RUN_DIR: str(run.run_dir)}
    added = cairn("finding", "add", "W1", "Slow loop", env=env, cwd=repo)
    assert added.returncode == 0, added.stderr
    assert [f.id for f in review.load(path).findings] == [*journalled, "W1"]


def test_a_killed_verdict_is_completed_when_the_evaluation_is_read(run: Any, repo: Path) -> None:
    checked = evaluation.Evaluation(
        ticket="T-1", round=1, criteria=[evaluation.Criterion(id="AC-1", text="it works")]
    )
    path = write_artifact(run, "evaluator", "eval-round-1", evaluation.render(checked))
    assert killed_writer(run, 3, "ac", "AC-1") == -signal.SIGKILL
    assert evaluation.load(path).criteria[0].result == "pending"
    after = catch_up_evaluation(run, path)
    assert (after.criteria[0].result, after.criteria[0].reason) == ("fail", "it does not")
    assert evaluation.load(path) == after
