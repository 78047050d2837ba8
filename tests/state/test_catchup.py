"""cairn catchup and cairn status in every state, with real runs, real owners and real kills."""

from __future__ import annotations

import json
import os
import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec

from cairn.state import journal, marker
from cairn.state.layout import MARKER
from cairn.terms import ENV_RUN_DIR
from cairn.util import clock
from helpers import (
    assert_error,
    assert_one_line_error,
    begin_run,
    cairn,
    git,
    hold_run,
    scripted_project,
    state_files,
    state_root,
    write,
)

TITLES = ["Parse the plan", "Wire the *CLI*", "Write docs"]


def catchup_json(repo: Path, *args: str) -> dict[str, Any]:
    result = cairn("catchup", *args, "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    loaded: dict[str, Any] = json.loads(result.stdout)
    return loaded


def test_none_when_nothing_ran(repo: Path) -> None:
    result = cairn("catchup", "--json", cwd=repo)  # the branch's own ticket
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["ticket"], report["state"]) == ("main", "none")
    assert report["next_command"] is None
    assert report["run"] is None
    assert state_files(state_root(repo)) == []


def test_an_unknown_ticket_is_bad_input_naming_the_known_ones(repo: Path) -> None:
    """(issue 22) ``catchup T-1`` where nothing of T-1 exists said ``none`` (exit 0): a typo
    went unnoticed. It is exit 2 naming the tickets there are: with a run, a snapshot only,
    or a fleet record only."""
    lonely = cairn("catchup", "T-1", cwd=repo)
    assert_one_line_error(lonely)
    assert "no ticket T-1 here, nor any other yet; start one with cairn run PLAN" in lonely.stderr
    _ref, lease = begin_run(repo, "RUN-1", ["a"])
    lease.release()
    write(repo, "loose.txt", "x\n")
    assert cairn("wip", "save", "--ticket", "SNAP-1", cwd=repo).returncode == 0
    from cairn.fleet import fleetstate
    from cairn.state.layout import discover

    fleetstate.write(
        discover(repo)[2],
        fleetstate.FleetTicket(
            ticket="FLEET-1", plan="cairn-queue/FLEET-1.md", state="queued", updated=clock.now()
        ),
    )
    before = state_files(state_root(repo))
    for args in (["catchup", "RUN-2"], ["catchup", "RUN-2", "--json"]):
        typo = cairn(*args, cwd=repo)
        message = assert_error(typo)
        assert "no ticket RUN-2 here; pass one of: FLEET-1, RUN-1, SNAP-1" in message
    assert state_files(state_root(repo)) == before
    for known in ("RUN-1", "SNAP-1", "FLEET-1"):
        assert cairn("catchup", known, cwd=repo).returncode == 0, known


def test_in_progress_then_interrupted_by_sigkill(repo: Path) -> None:
    proc, run_id = hold_run(repo, "T-1", TITLES)
    try:
        live = catchup_json(repo, "T-1")
        assert live["state"] == "in_progress"
        assert live["owner_state"] == "alive"
        assert live["owner"]["pid"] == proc.pid
        assert live["run"] == run_id
        assert live["next_command"] is None
        text = cairn("catchup", "T-1", "--format", "context", cwd=repo).stdout
        assert "A run is in the middle of implementing the plan" in text
        second = cairn("status", "--json", cwd=repo)
        assert json.loads(second.stdout)[0]["state"] == "in_progress"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    after = catchup_json(repo, "T-1")
    assert after["state"] == "interrupted"
    assert after["owner_state"] == "dead"
    assert f"pid {proc.pid}" in after["owner_detail"]
    assert after["next_command"] == "cairn resume T-1"
    assert after["total"] == 3
    assert after["remaining"] == ["0", "1", "2"]


def test_interrupted_report_names_task_and_snapshot(repo: Path) -> None:
    ref, lease = begin_run(repo, "T-2", TITLES)
    env = {ENV_RUN_DIR: str(ref.run_dir)}
    assert cairn("task", "done", "0", "--files", "a.py", env=env, cwd=repo).returncode == 0
    assert cairn("task", "start", "1", env=env, cwd=repo).returncode == 0
    write(repo, "new.txt", "unsaved work\n")
    saved = cairn("wip", "save", "--ticket", "T-2", "--json", cwd=repo)
    commit = json.loads(saved.stdout)["commit"]
    lease.release()
    current = marker.read(ref.marker_path)
    assert current is not None and current.owner is not None
    marker.write(
        ref.marker_path,
        msgspec.structs.replace(
            current, owner=msgspec.structs.replace(current.owner, pid=2**22 + 7)
        ),
    )

    report = catchup_json(repo, "T-2")
    assert report["state"] == "interrupted"
    assert report["task"] == 1
    assert report["task_title"] == "Wire the *CLI*"
    assert report["done"] == ["0"] and report["remaining"] == ["1", "2"]
    assert report["snapshot"]["commit"] == commit
    assert report["snapshot"]["ref"] == "refs/cairn/wip/T-2"
    assert report["summary_status"] == "In progress — task 1 of 3"
    assert report["last_event"]["event"] == "task"
    assert report["artifacts"] == ["01_coder_change-summary.md"]

    text = cairn("catchup", "T-2", "--format", "context", cwd=repo).stdout
    assert "You were in the middle of implementing the plan, task 1 of 3" in text
    assert '"Wire the *CLI*"' in text
    assert "Tasks done: 0; remaining: 1, 2." in text
    assert f"refs/cairn/wip/T-2 ({commit[:7]}" in text
    assert "Resume with: cairn resume T-2" in text

    human = cairn("catchup", "T-2", cwd=repo).stdout
    assert "ticket T-2: interrupted" in human
    assert "next: cairn resume T-2" in human


def test_done_is_inferred_after_a_finished_run(repo: Path) -> None:
    from cairn.state.runstate import finish

    ref, lease = begin_run(repo, "T-3", ["Only task"])
    env = {ENV_RUN_DIR: str(ref.run_dir)}
    assert cairn("task", "done", "0", env=env, cwd=repo).returncode == 0
    finish(ref, lease)
    assert not ref.marker_path.exists()
    report = catchup_json(repo, "T-3")
    assert report["state"] == "done"
    assert report["inferred"] is True
    assert report["summary_status"] == "Completed — 1 of 1 tasks"
    assert report["next_command"] is None
    events = [e["event"] for e in journal.read(ref.run_dir)[0]]
    assert events[0] == "run_started" and events[-1] == "run_finished"


def test_interrupted_is_inferred_from_artifacts_without_a_marker(repo: Path) -> None:
    ref, lease = begin_run(repo, "T-4", TITLES)
    lease.release()
    ref.marker_path.unlink()
    report = catchup_json(repo, "T-4")
    assert report["state"] == "interrupted"
    assert report["inferred"] is True
    assert report["next_command"] == "cairn resume T-4"
    text = cairn("catchup", "T-4", "--format", "context", cwd=repo).stdout
    assert "Inferred from the run's files" in text


def test_latest_of_many_runs_is_used(repo: Path) -> None:
    from cairn.state.runstate import finish

    for _ in range(3):
        ref, lease = begin_run(repo, "T-5", ["a"])
        cairn("task", "done", "0", env={ENV_RUN_DIR: str(ref.run_dir)}, cwd=repo)
        finish(ref, lease)
    last, lease = begin_run(repo, "T-5", ["a", "b"])
    lease.release()
    last.marker_path.unlink()
    report = catchup_json(repo, "T-5")
    assert report["run"] == last.run_id
    assert report["state"] == "interrupted"
    assert len(os.listdir(last.run_dir.parent)) >= 4


def _remote_marker(repo: Path, ticket: str, age: timedelta) -> Path:
    path = state_root(repo) / "tickets" / ticket / MARKER
    path.parent.mkdir(parents=True)
    when = (clock.now() - age).isoformat()
    path.write_text(
        "version: 1\nskill: impl\nphase: review\nround: 2\ntask: 5\n"
        f"started_at: '{when}'\nlast_updated: '{when}'\nticket: {ticket}\n"
        "owner: {host: build-7.example, pid: 4242, boot_id: abc}\n"
    )
    return path


def test_remote_owner_is_in_progress_until_stale(repo: Path) -> None:
    _remote_marker(repo, "T-6", timedelta(hours=1))
    report = catchup_json(repo, "T-6")
    assert report["state"] == "in_progress"
    assert report["owner_state"] == "remote"


def test_stale_marker_reported_and_cleared(repo: Path) -> None:
    path = _remote_marker(repo, "T-7", timedelta(days=2))
    report = catchup_json(repo, "T-7")
    assert report["state"] == "stale"
    assert report["age_seconds"] >= 2 * 86400
    assert "pid 4242 on build-7.example" in report["owner_detail"]
    human = cairn("catchup", "T-7", cwd=repo).stdout
    assert "stale" in human and "build-7.example" in human and "2d" in human

    cleared = catchup_json(repo, "T-7", "--clear-stale")
    assert cleared["cleared"] is True
    assert not path.exists()
    assert cleared["state"] == "none"


def test_clear_stale_refuses_a_live_marker(repo: Path) -> None:
    _remote_marker(repo, "T-8", timedelta(minutes=5))
    before = state_files(state_root(repo))
    result = cairn("catchup", "T-8", "--clear-stale", cwd=repo)
    assert_one_line_error(result)
    assert "not stale" in result.stderr or "no stale marker" in result.stderr
    assert state_files(state_root(repo)) == before


def test_stale_after_is_configurable(repo: Path) -> None:
    write(repo, "cairn.toml", '[marker]\nstale_after = "30m"\n')
    _remote_marker(repo, "T-9", timedelta(hours=1))
    assert catchup_json(repo, "T-9")["state"] == "stale"


def test_hand_written_five_field_marker(repo: Path) -> None:
    path = state_root(repo) / "tickets" / "T-10" / MARKER
    path.parent.mkdir(parents=True)
    when = clock.now().isoformat()
    path.write_text(
        f"skill: impl\nphase: code-reviewer\nround: 2\nstarted_at: {when}\nlast_updated: {when}\n"
    )
    report = catchup_json(repo, "T-10")
    assert report["state"] == "interrupted"
    assert report["phase"] == "code-reviewer"
    assert report["round"] == 2
    text = cairn("catchup", "T-10", "--format", "context", cwd=repo).stdout
    assert text.startswith("You were in the middle of the code-reviewer step, round 2")


def test_snapshot_only_ticket(repo: Path) -> None:
    write(repo, "loose.txt", "x\n")
    assert cairn("wip", "save", "--ticket", "T-11", cwd=repo).returncode == 0
    report = catchup_json(repo, "T-11")
    assert report["state"] == "none"
    assert report["snapshot"]["ref"] == "refs/cairn/wip/T-11"
    assert report["next_command"] == "cairn wip restore refs/cairn/wip/T-11"
    rows = json.loads(cairn("status", "--json", cwd=repo).stdout)
    assert [(r["ticket"], r["state"]) for r in rows] == [("T-11", "none")]


def test_default_ticket_is_the_branch(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature/login")
    _ref, lease = begin_run(repo, "feature-login", ["a"])
    report = catchup_json(repo)
    assert report["ticket"] == "feature-login"
    assert report["state"] == "in_progress"
    lease.release()


def test_status_rows(repo: Path) -> None:
    from cairn.state.runstate import finish

    live, live_lease = begin_run(repo, "A-1", TITLES)
    cairn("task", "start", "1", env={ENV_RUN_DIR: str(live.run_dir)}, cwd=repo)
    done, done_lease = begin_run(repo, "B-2", ["x"])
    cairn("task", "done", "0", env={ENV_RUN_DIR: str(done.run_dir)}, cwd=repo)
    finish(done, done_lease)
    _remote_marker(repo, "C-3", timedelta(days=3))
    rows = {r["ticket"]: r for r in json.loads(cairn("status", "--json", cwd=repo).stdout)}
    assert rows["A-1"]["state"] == "in_progress"
    assert (rows["A-1"]["task"], rows["A-1"]["total"]) == (1, 3)
    assert rows["A-1"]["owner"] == f"pid {os.getpid()} on {os.uname().nodename}"
    assert rows["B-2"]["state"] == "done"
    assert rows["C-3"]["state"] == "stale"
    assert rows["C-3"]["round"] == 2
    human = cairn("status", cwd=repo).stdout
    assert "A-1" in human and "in progress" in human and "1/3" in human
    live_lease.release()


def test_status_in_an_empty_repo(repo: Path) -> None:
    result = cairn("status", cwd=repo)
    assert result.returncode == 0
    assert "no tickets" in result.stdout


def test_catchup_outside_a_repo(tmp_path: Path) -> None:
    assert_one_line_error(cairn("catchup", cwd=tmp_path))
    assert_one_line_error(cairn("status", cwd=tmp_path))


def test_review_run_reports_the_open_finding(repo: Path) -> None:
    ref, lease = begin_run(repo, "R-1", ["Null check", "Slow loop", "Typo"], review=True)
    env = {ENV_RUN_DIR: str(ref.run_dir)}
    assert cairn("finding", "F1", "--status", "FIXED", env=env, cwd=repo).returncode == 0
    lease.release()
    ref.marker_path.unlink()
    report = catchup_json(repo, "R-1")
    assert (report["state"], report["mode"], report["finding"]) == ("interrupted", "review", "F2")
    assert report["done"] == ["F1"] and report["remaining"] == ["F2", "F3"]
    assert report["round"] == 1
    text = cairn("catchup", "R-1", "--format", "context", cwd=repo).stdout
    assert "finding F2 of 3" in text and "Findings done: F1; remaining: F2, F3." in text


def test_status_skips_snapshot_refs_that_are_not_ticket_ids(repo: Path) -> None:
    git(repo, "update-ref", "refs/cairn/wip/team/PROJ-1", "HEAD")
    _ref, lease = begin_run(repo, "T-12", ["a"])
    result = cairn("status", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert [r["ticket"] for r in json.loads(result.stdout)] == ["T-12"]
    lease.release()


REVIEWED = {
    "coder": [
        [{"cairn": ["task", "start", "1"]}, {"write": {"path": "a.py", "content": "a = 1\n"}}],
        [{"cairn": ["task", "done", "1", "--files", "a.py"]}, {"cairn": ["task", "start", "2"]}],
        [{"write": {"path": "b.py", "content": "b = 1\n"}}, {"cairn": ["task", "done", "2"]}],
        [{"say": "looking at F1"}],
        [{"say": "still looking"}],
        [{"say": "still looking"}],
    ],
    "reviewer": [[{"cairn": ["finding", "add", "F1", "b must be 2", "--location", "b.py:1"]}]],
}


def test_catchup_after_a_review_round_still_names_the_plans_tasks(tmp_path: Path) -> None:
    """(issue 22) Cut off while fixing a review's finding, the run's latest change summary lists
    the findings only: catch-up said ``done: none · remaining: F1`` and nothing of the plan.
    It names the plan's tasks (from the run's implementation summary) and the findings, and
    says what the run was doing in plain words (it said ``impl at fix``)."""
    repo, plan = scripted_project(
        tmp_path, REVIEWED, tasks=("Add the parser", "Wire it up"), max_turns=3
    )
    config = (repo / "cairn.toml").read_text()
    write(repo, "cairn.toml", config.replace('["implement"]', '["implement", "review", "fix"]'))
    git(repo, "commit", "-qam", "review too")
    ran = cairn("run", str(plan), "--ticket", "T-1", cwd=repo)
    assert ran.returncode == 3, ran.stdout + ran.stderr
    report = catchup_json(repo, "T-1")
    assert (report["state"], report["mode"], report["phase"]) == ("interrupted", "review", "fix")
    assert [(t["id"], t["title"], t["status"]) for t in report["tasks"]] == [
        ("1", "Add the parser", "completed"),
        ("2", "Wire it up", "completed"),
    ]
    assert report["remaining"] == ["F1"]
    text = cairn("catchup", "T-1", cwd=repo).stdout
    assert "  where: fixing the review's findings, round 1\n" in text
    assert "  tasks done: 1, 2 · remaining: none\n" in text
    assert "  findings done: none · remaining: F1\n" in text
    context = cairn("catchup", "T-1", "--format", "context", cwd=repo).stdout
    assert context.startswith("You were in the middle of fixing the review's findings, round 1")
    assert "Tasks done: 1, 2; remaining: none. Findings done: none; remaining: F1." in context
    for said in (text, context):
        assert " at fix" not in said and "impl" not in said
