"""Progress commands: each updates summary, marker and journal; bad reports change nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn import summary
from cairn.state import journal, marker
from cairn.state.runstate import RunRef
from cairn.summary.render import status_line
from cairn.terms import ENV_RUN_DIR
from helpers import assert_one_line_error, begin_run, cairn, state_files, summary_file

TITLES = ["Parse the plan", "Wire the CLI", "Write docs"]


@pytest.fixture
def run(repo: Path) -> Iterator[RunRef]:
    ref, lease = begin_run(repo, "T-1", TITLES)
    yield ref
    lease.release()


def env_of(ref: RunRef) -> dict[str, str]:
    return {ENV_RUN_DIR: str(ref.run_dir)}


def current(ref: RunRef) -> summary.Summary:
    loaded = summary.load(summary_file(ref))
    assert loaded is not None, ref
    return loaded


def marked(ref: RunRef) -> marker.Marker:
    found = marker.read(ref.marker_path)
    assert found is not None, ref
    return found


def test_scaffold_exists_before_any_report(run: RunRef) -> None:
    loaded = current(run)
    assert [t.status for t in loaded.tasks] == ["pending"] * 3
    assert status_line(loaded) == "Not started — 0 of 3 tasks"
    assert summary_file(run).name == "01_coder_change-summary.md"
    m = marker.read(run.marker_path)
    assert m is not None and m.run == run.run_id and m.ticket == "T-1"


def test_task_lifecycle_updates_summary_marker_and_journal(run: RunRef, repo: Path) -> None:
    env = env_of(run)
    started = cairn("task", "start", "0", env=env, cwd=repo)
    assert started.returncode == 0, started.stderr
    assert "task 0 in progress" in started.stdout
    assert current(run).tasks[0].status == "in progress"
    assert marked(run).task == 0

    done = cairn(
        "task",
        "done",
        "0",
        "--files",
        "src/a.py,src/b.py",
        "--files",
        "tests/t.py",
        "--outcome",
        "Parser reads headings",
        "--notes",
        "fast path only",
        env=env,
        cwd=repo,
    )
    assert done.returncode == 0, done.stderr
    task = current(run).tasks[0]
    assert task.status == "completed"
    assert task.files == ["src/a.py", "src/b.py", "tests/t.py"]
    assert task.outcome == "Parser reads headings"
    assert task.notes == "fast path only"
    assert marked(run).task == 1

    assert cairn("task", "skip", "1", "--notes", "not needed", env=env, cwd=repo).returncode == 0
    assert cairn("task", "defer", "2", "--notes", "after review", env=env, cwd=repo).returncode == 0
    assert [t.status for t in current(run).tasks] == ["completed", "skipped", "deferred"]

    events, warnings = journal.read(run.run_dir)
    assert warnings == []
    tasks = [(e["task"], e["status"]) for e in events if e["event"] == "task"]
    assert tasks == [(0, "in progress"), (0, "completed"), (1, "skipped"), (2, "deferred")]


def test_gate_and_deferred_item(run: RunRef, repo: Path) -> None:
    env = env_of(run)
    assert (
        cairn(
            "gate", "Tests", "--result", "pass", "--command", "pytest -q", env=env, cwd=repo
        ).returncode
        == 0
    )
    assert cairn("gate", "Lint", "--result", "fail", env=env, cwd=repo).returncode == 0
    assert (
        cairn(
            "gate", "Tests", "--result", "fail", "--command", "pytest -q", env=env, cwd=repo
        ).returncode
        == 0
    )
    assert cairn("defer", "Handle Windows paths", env=env, cwd=repo).returncode == 0
    loaded = current(run)
    assert loaded.gates is not None
    assert [(g.name, g.command, g.result) for g in loaded.gates] == [
        ("Tests", "pytest -q", "fail"),
        ("Lint", None, "fail"),
    ]
    assert loaded.deferred == ["Handle Windows paths"]
    text = summary_file(run).read_text()
    assert "- Tests (`pytest -q`): fail" in text


def test_ticket_option_finds_the_live_run(run: RunRef, repo: Path) -> None:
    result = cairn("task", "start", "2", "--ticket", "T-1", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["run"] == run.run_id
    assert payload["status"] == "In progress — task 2 of 3"
    assert (payload["resolved"], payload["total"]) == (0, 3)


def test_findings_in_a_review_run(repo: Path) -> None:
    ref, lease = begin_run(repo, "R-1", ["Null check", "Typo in docs"], review=True)
    env = env_of(ref)
    result = cairn(
        "finding", "F1", "--status", "FIXED", "--action", "Added a guard", env=env, cwd=repo
    )
    assert result.returncode == 0, result.stderr
    loaded = current(ref)
    assert loaded.findings[0].status == "FIXED"
    assert loaded.findings[0].action == "Added a guard"
    assert status_line(loaded) == "In progress — finding 2 of 2"
    bad = cairn("finding", "F9", "--status", "FIXED", env=env, cwd=repo)
    assert_one_line_error(bad)
    assert "F9" in bad.stderr
    lease.release()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["task", "start", "7"], "task 7"),
        (["task", "start", "x"], "whole number"),
        (["task", "start", "-1"], "-1"),
        (["task", "skip", "1"], "--notes"),
        (["task", "defer", "1", "--notes", "  "], "--notes"),
        (["finding", "F1", "--status", "FIXED"], "review"),
        (["finding", "F1", "--status", "MAYBE"], "--status"),
        (["gate", "Tests", "--result", "maybe"], "'pass', 'fail'"),
        (["gate", "bad\nname", "--result", "pass"], "gate"),
    ],
)
def test_bad_reports_exit_2_and_write_nothing(
    run: RunRef, repo: Path, args: list[str], needle: str
) -> None:
    root = run.run_dir.parent.parent.parent
    before = state_files(root)
    result = cairn(*args, env=env_of(run), cwd=repo)
    assert_one_line_error(result)
    assert needle in result.stderr
    assert state_files(root) == before


def test_completed_task_cannot_go_back(run: RunRef, repo: Path) -> None:
    env = env_of(run)
    assert cairn("task", "done", "0", env=env, cwd=repo).returncode == 0
    root = run.run_dir.parent.parent.parent
    before = state_files(root)
    for args in (["task", "start", "0"], ["task", "skip", "0", "--notes", "n"]):
        result = cairn(*args, env=env, cwd=repo)
        assert_one_line_error(result)
        assert "completed" in result.stderr
    assert state_files(root) == before


def test_run_dir_env_must_be_a_run(repo: Path, tmp_path: Path) -> None:
    assert_one_line_error(cairn("task", "start", "0", env={ENV_RUN_DIR: str(tmp_path)}, cwd=repo))
    fake = tmp_path / "tickets" / "T-1" / "20261130-101500Z"
    result = cairn("task", "start", "0", env={ENV_RUN_DIR: str(fake)}, cwd=repo)
    assert_one_line_error(result)
    assert "does not exist" in result.stderr


def test_no_live_run_for_ticket(repo: Path) -> None:
    result = cairn("task", "start", "0", "--ticket", "T-9", cwd=repo)
    assert_one_line_error(result)
    assert "no run in progress" in result.stderr
    assert not (repo / ".git" / "cairn").exists()


def test_hostile_ticket_ids(repo: Path) -> None:
    for ticket in ("../etc", "a/../../b", "-rf", "x\ny"):
        result = cairn("task", "start", "0", "--ticket", ticket, cwd=repo)
        assert_one_line_error(result)
        assert "invalid ticket id" in result.stderr
        assert_one_line_error(cairn("catchup", ticket, cwd=repo))
    assert not (repo / ".git" / "cairn").exists()
