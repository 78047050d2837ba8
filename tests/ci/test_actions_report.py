"""A run's report inside GitHub Actions (cairn.ci.actions.report), against the project's fake
GitHub on 127.0.0.1 (tests/fleet/fake_github.py): the step summary, the one comment a re-run
edits, what an interrupted run and an unknown cost say, and every failure a warning, in time."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cairn import summary
from cairn.ci import in_actions
from cairn.ci.actions import BUDGET, issue_number, report
from cairn.ci.markdown import STEP_SUMMARY_LIMIT
from cairn.run.orchestrator.outcome import Remote, RunOutcome
from cairn.state import accounting
from cairn.terms import ENV_ACTIONS_ISSUE
from fleet.fake_github import TOKEN, FakeGitHub, serve
from helpers import cairn, scripted_project

TICKET = "GH-7"
KEY = f"cairn:actions:{TICKET}"
NOW = datetime(2026, 12, 3, 16, 0, tzinfo=UTC)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    fake.add_issue(7, "Add a greeting", "Task 1: greet\n")
    yield from serve(fake)


def actions_env(tmp_path: Path, github: FakeGitHub, **more: str) -> dict[str, str]:
    """The environment of a job step the ``issues`` event started, as the runner sets it."""
    event = tmp_path / "event.json"
    if not event.exists():
        event.write_text(json.dumps({"action": "labeled", "issue": {"number": 7}}))
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_EVENT_NAME": "issues",
        "GITHUB_API_URL": github.url,
        "GITHUB_SERVER_URL": "https://github.test",
        "GITHUB_REPOSITORY": github.repo,
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_TOKEN": TOKEN,
        **more,
    }


def change_summary(tmp_path: Path, done: int, total: int = 3) -> Path:
    """A real change summary of ``total`` tasks, the first ``done`` completed."""
    made = summary.scaffold_tasks(
        TICKET, "20261203-160000Z", [(n, f"Task {n}") for n in range(1, total + 1)], NOW
    )
    for n in range(1, done + 1):
        made = summary.complete_task(made, n, NOW, files=[f"src/t{n}.py"], outcome="done")
    path = tmp_path / "run" / "01_coder_change-summary.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    summary.save(path, made)
    return path


PUSHED = Remote(name="origin", branch=f"cairn/{TICKET}", pushed=True, commit="ab" * 20)


def outcome(tmp_path: Path, status: str = "completed", **fields: Any) -> RunOutcome:
    """A run's outcome; by default that of a --remote run whose last push reached ``origin``."""
    codes = {"completed": 0, "needs_review": 1, "needs_input": 1, "interrupted": 3}
    given: dict[str, Any] = {
        "ticket": TICKET,
        "run": "20261203-160000Z",
        "status": status,
        "exit_code": codes[status],
        "run_dir": str(tmp_path / "run"),
        "summary_path": str(tmp_path / "run" / "01_coder_change-summary.md"),
        "snapshot": "0123456789abcdef0123456789abcdef01234567",
        "dispatches": 2,
        "turns": 9,
        "elapsed_seconds": 252.0,
        "usage": accounting.usage({"input_tokens": 150_000, "output_tokens": 32_000}),
        **fields,
    }
    if "cost" in given:
        given["usage"] = {**given["usage"], "cost_usd": given.pop("cost")}
    given.setdefault("remote", PUSHED)
    return RunOutcome(**given)


def step_summary(env: dict[str, str]) -> str:
    return Path(env["GITHUB_STEP_SUMMARY"]).read_text()


def test_a_run_writes_the_step_summary_and_one_comment_that_a_rerun_edits(
    tmp_path: Path, github: FakeGitHub
) -> None:
    change_summary(tmp_path, done=3)
    env = actions_env(tmp_path, github)
    assert report(outcome(tmp_path, cost=0.84), env) == []

    written = step_summary(env)
    assert written.startswith(f"## cairn · ticket `{TICKET}`\n")
    assert f"**cairn: ticket {TICKET} completed**" in written
    assert "- **Tasks done:** 3 of 3" in written and "- **Cost:** $0.84 (182k tokens)" in written
    assert "- **Activity:** 9 turns in 2 dispatches, 4m 12s" in written
    assert f"[`cairn/{TICKET}`](https://github.test/octo/app/tree/cairn/{TICKET})" in written
    assert "[run 4242, attempt 1](https://github.test/octo/app/actions/runs/4242)" in written
    # the change summary itself, its title under the section's heading, without front matter
    assert f"\n### Change summary — ticket {TICKET}\n" in written
    assert "\n#### Per-task summary\n" in written and "\n##### Task 1: Task 1" in written
    assert "\n---\n" not in written
    assert "re-run this job" not in written

    (posted,) = github.requests("POST", "/issues/7/comments")
    assert posted.status == 201
    assert github.keys_on(7) == [KEY]
    (comment,) = github.comments_on(7)
    assert comment.startswith(f"**cairn: ticket {TICKET} completed**")
    assert "- **Tasks done:** 3 of 3" in comment and "- **Cost:** $0.84" in comment

    # a re-run of the job (attempt 2) cut off after a task: the same comment, edited
    change_summary(tmp_path, done=1)
    rerun = actions_env(tmp_path, github, GITHUB_RUN_ATTEMPT="2")
    cut = outcome(tmp_path, "interrupted", reason="signal", cost=0.31)
    assert report(cut, rerun) == []
    assert len(github.requests("POST", "/comments")) == 1
    (edited,) = github.requests("PATCH", "/issues/comments/1")
    assert edited.status == 200
    assert github.keys_on(7) == [KEY]
    (comment,) = github.comments_on(7)
    assert "was interrupted (signal)** — re-run this job to continue." in comment
    assert "- **Tasks done:** 1 of 3" in comment and "attempt 2" in comment
    # the step's outputs, the last written of each name being the one the runner keeps
    outputs = Path(rerun["GITHUB_OUTPUT"]).read_text().splitlines()
    assert outputs[-2:] == ["status=interrupted", f"branch=cairn/{TICKET}"]
    # the step summary gets a section per report: both are there, in order
    sections = step_summary(rerun).split(f"## cairn · ticket `{TICKET}`")
    assert len(sections) == 3 and "attempt 2" in sections[2]


def test_an_interrupted_run_says_to_re_run_the_job(tmp_path: Path, github: FakeGitHub) -> None:
    change_summary(tmp_path, done=2)
    env = actions_env(tmp_path, github)
    cut = outcome(tmp_path, "interrupted", reason="timeout", error="the turn took too long")
    assert report(cut, env) == []
    status = f"**cairn: ticket {TICKET} was interrupted (timeout: the turn took too long)**"
    assert f"{status} — re-run this job to continue." in step_summary(env)
    (comment,) = github.comments_on(7)
    assert comment.startswith(f"{status} — re-run this job to continue.")
    assert "\nRe-run this job to continue: it resumes from the branch" in comment
    assert "- **Tasks done:** 2 of 3" in comment


def test_a_run_whose_work_is_not_on_the_remote_promises_no_re_run(
    tmp_path: Path, github: FakeGitHub
) -> None:
    env = actions_env(tmp_path, github)
    failed = msgspec.structs.replace(PUSHED, pushed=False, error="the remote is down")
    assert report(outcome(tmp_path, "interrupted", reason="signal", remote=failed), env) == []
    (comment,) = github.comments_on(7)
    assert "re-run this job" not in comment
    assert "- **Pushed to:** NOT pushed to origin (the remote is down)" in comment
    fenced = msgspec.structs.replace(PUSHED, pushed=False, fenced="another machine continued it")
    assert report(outcome(tmp_path, "interrupted", reason="fenced", remote=fenced), env) == []
    written = step_summary(env)
    assert "- **Pushed to:** not pushed: another machine continued it" in written
    assert "re-run this job" not in written
    assert report(outcome(tmp_path, "interrupted", reason="signal"), env) == []
    (comment,) = github.comments_on(7)
    assert "re-run this job to continue" in comment
    assert f"- **Pushed to:** origin (`cairn/{TICKET}` at `{'ab' * 6}`" in comment


def test_a_cost_no_agent_reported_is_unknown_never_zero(tmp_path: Path, github: FakeGitHub) -> None:
    change_summary(tmp_path, done=1)
    env = actions_env(tmp_path, github)
    assert report(outcome(tmp_path, usage=accounting.usage(), usage_unknown=1), env) == []
    (comment,) = github.comments_on(7)
    assert "- **Cost:** unknown (usage of 1 dispatch unknown)" in comment
    assert "$0" not in comment and "$0" not in step_summary(env)
    # tokens counted, no price: the tokens, and the cost still unknown
    assert report(outcome(tmp_path), env) == []
    assert "- **Cost:** unknown (182k tokens)" in github.comments_on(7)[0]
    # a price for some dispatches only: a lower bound
    assert report(outcome(tmp_path, cost=1.5, usage_unknown=2), env) == []
    expected = "at least $1.50 (182k tokens; usage of 2 dispatches unknown)"
    assert f"- **Cost:** {expected}" in github.comments_on(7)[0]


def test_without_a_token_one_warning_and_nothing_posted(tmp_path: Path, github: FakeGitHub) -> None:
    change_summary(tmp_path, done=3)
    env = actions_env(tmp_path, github)
    del env["GITHUB_TOKEN"]
    (warning,) = report(outcome(tmp_path), env)
    assert warning.startswith("no comment on the issue or pull request: GITHUB_TOKEN is not set")
    assert github.seen == []
    assert "- **Tasks done:** 3 of 3" in step_summary(env)  # the summary is written all the same


def test_without_an_issue_number_one_warning(tmp_path: Path, github: FakeGitHub) -> None:
    (tmp_path / "event.json").write_text(json.dumps({"ref": "refs/heads/main"}))
    env = actions_env(tmp_path, github, GITHUB_EVENT_NAME="workflow_dispatch")
    (warning,) = report(outcome(tmp_path), env)
    assert warning == (
        "no comment on the issue or pull request: workflow_dispatch names no issue or pull "
        f"request; set {ENV_ACTIONS_ISSUE} to the number of the issue or pull request to "
        "comment on"
    )
    assert github.seen == []
    # the variable names one: the comment goes there
    github.add_issue(12, "Elsewhere", "")
    assert report(outcome(tmp_path), {**env, ENV_ACTIONS_ISSUE: "12"}) == []
    assert github.keys_on(12) == [KEY]
    (warning,) = report(outcome(tmp_path), {**env, ENV_ACTIONS_ISSUE: "twelve"})
    assert f"{ENV_ACTIONS_ISSUE} is 'twelve', not an issue or pull request number" in warning


def test_the_number_comes_from_the_issue_or_the_pull_request(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    env = {"GITHUB_EVENT_PATH": str(event)}
    event.write_text(json.dumps({"pull_request": {"number": 31}, "number": 31}))
    assert issue_number(env) == (31, "")
    event.write_text(json.dumps({"issue": {"number": 5, "pull_request": {}}, "comment": {}}))
    assert issue_number(env) == (5, "")
    assert issue_number({**env, ENV_ACTIONS_ISSUE: "#9"}) == (9, "")
    event.write_text("{not json")
    number, why = issue_number(env)
    assert number is None and why.startswith(f"the event payload {event} cannot be read")


def test_a_github_error_is_a_warning_not_an_exception(tmp_path: Path, github: FakeGitHub) -> None:
    change_summary(tmp_path, done=3)
    env = actions_env(tmp_path, github)
    github.fail_once("GET", "/issues/7/comments", 502)
    (warning,) = report(outcome(tmp_path), env)
    assert warning.startswith("the comment on #7 was not posted: GET ")
    assert "HTTP 502" in warning and warning.endswith("the step summary has the outcome")
    assert github.comments_on(7) == []
    github.fail_once("POST", "/issues/7/comments", 503)
    (warning,) = report(outcome(tmp_path), env)
    assert "HTTP 503" in warning and github.comments_on(7) == []
    # the next job posts it, and the one after edits it
    assert report(outcome(tmp_path), env) == []
    github.fail_once("PATCH", "/issues/comments/1", 500)
    (warning,) = report(outcome(tmp_path), env)
    assert warning.startswith("the comment on #7 was not updated: PATCH ")
    assert github.keys_on(7) == [KEY]


def test_a_github_that_never_answers_is_given_up_on_in_time(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """A runner's SIGTERM comes 7.5 s after its SIGINT: the report leaves the run time to end."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connections are accepted by the kernel, and never answered
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        env = actions_env(tmp_path, github, GITHUB_API_URL=url)
        started = time.monotonic()
        (warning,) = report(outcome(tmp_path), env)
        took = time.monotonic() - started
    finally:
        silent.close()
    assert warning.startswith("the comment on #7 was not posted: GET ")
    assert took < BUDGET + 1.0, took


def test_the_comment_is_found_past_the_first_page(tmp_path: Path, github: FakeGitHub) -> None:
    for n in range(130):
        github.say(7, f"a person's comment {n}")
    assert report(outcome(tmp_path), actions_env(tmp_path, github)) == []
    assert report(outcome(tmp_path), actions_env(tmp_path, github)) == []
    assert github.keys_on(7) == ["-"] * 130 + [KEY]
    assert len(github.requests("PATCH", "/issues/comments/131")) == 1
    pages = [s.query.get("page", "1") for s in github.requests("GET", "/issues/7/comments")]
    assert pages == ["1", "2", "1", "2"]


def test_a_huge_change_summary_is_cut_to_stay_under_one_mib(
    tmp_path: Path, github: FakeGitHub
) -> None:
    env = actions_env(tmp_path, github)
    Path(env["GITHUB_STEP_SUMMARY"]).write_text("## An earlier step's own lines\n" * 3000)
    path = tmp_path / "run" / "01_coder_change-summary.md"
    path.parent.mkdir(parents=True)
    lines = [f"- note {n}: " + "é" * 60 for n in range(40_000)]  # 2-byte characters: ~5 MiB
    path.write_text("# Change summary\n\n```text\n" + "\n".join(lines) + "\n```\n")
    assert report(outcome(tmp_path), env) == []
    data = Path(env["GITHUB_STEP_SUMMARY"]).read_bytes()
    assert len(data) < STEP_SUMMARY_LIMIT
    text = data.decode()  # cut at a whole character
    assert text.startswith("## An earlier step's own lines\n")
    assert "*(The change summary is cut here to keep the step summary under GitHub's 1 MiB " in text
    kept = text.split("```text\n", 1)[1]
    assert kept.count("\n```\n") == 1  # the code block left open is closed before the note
    assert "- **Tasks done:** unknown" in text  # not a change summary cairn can read


def test_a_step_summary_already_full_is_left_alone(tmp_path: Path, github: FakeGitHub) -> None:
    env = actions_env(tmp_path, github)
    Path(env["GITHUB_STEP_SUMMARY"]).write_bytes(b"x" * (STEP_SUMMARY_LIMIT - 100))
    (warning,) = report(outcome(tmp_path), env)
    assert warning.startswith("the step summary is full (1023.9 KiB of GitHub's 1 MiB a step)")
    assert Path(env["GITHUB_STEP_SUMMARY"]).stat().st_size == STEP_SUMMARY_LIMIT - 100
    assert github.keys_on(7) == [KEY]


def test_in_actions_is_the_runners_variable() -> None:
    assert in_actions({"GITHUB_ACTIONS": "true", "CI": "true"})
    assert not in_actions({"CI": "true"}) and not in_actions({"GITHUB_ACTIONS": "false"})


def test_a_fleets_attempts_are_no_step_of_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """A supervisor run as a job's step starts runs that report to the fleet's tracker only."""
    from cairn.fleet.watch import child_env

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", "/tmp/summary")
    assert not in_actions(child_env()) and "GITHUB_STEP_SUMMARY" in child_env()


def test_cairn_run_in_actions_reports_when_it_ends(tmp_path: Path, github: FakeGitHub) -> None:
    """The command line calls the report after the run's own output: ``cairn run`` as a job's
    step runs it, with the Actions environment."""
    script = {
        "coder": [
            [
                {"usage": {"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.42}},
                {"write": {"path": "greet.txt", "content": "hi\n"}},
                {"cairn": ["task", "done", "1"]},
                {"cairn": ["task", "done", "2"]},
            ]
        ]
    }
    repo, plan = scripted_project(tmp_path, script, ticket=TICKET)
    env = actions_env(tmp_path, github)
    result = cairn("run", str(plan), "--ticket", TICKET, "--json", cwd=repo, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["status"] == "completed"
    written = step_summary(env)
    assert "- **Tasks done:** 2 of 2" in written and "- **Cost:** $0.42 (2k tokens)" in written
    (comment,) = github.comments_on(7)
    assert comment.startswith(f"**cairn: ticket {TICKET} completed**")
    # outside Actions: no report
    quiet = {**env, "GITHUB_ACTIONS": "", "GITHUB_STEP_SUMMARY": str(tmp_path / "none.md")}
    result = cairn("run", str(plan), "--ticket", "GH-8", cwd=repo, env=quiet)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (tmp_path / "none.md").exists() and len(github.comments_on(7)) == 1


def test_a_cancelled_job_reports_the_cut_and_a_rerun_edits_the_comment(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """The runner's cancel: SIGINT to the step's process (cairn, exec'd by the action) in the
    middle of task 2 of a run without --remote. The run is cut off, reports that its work ends
    with this runner (no re-run promised), and exits 3 well before the SIGTERM that would follow
    7.5 s later; a resume on the same runner completes and edits the one comment
    (tests/ci/test_action_remote.py: the same with --remote, in fresh clones)."""
    script = {
        "coder": [
            [
                {"cairn": ["task", "done", "1"]},
                {"write": {"path": "started-2.txt", "content": "half\n"}},
                {"sleep": 60},
            ],
            [{"cairn": ["task", "done", "2"]}],
        ]
    }
    repo, plan = scripted_project(tmp_path, script, ticket=TICKET, max_continuations=1)
    env = {**os.environ, **actions_env(tmp_path, github)}
    command = [sys.executable, "-m", "cairn", "run", str(plan), "--ticket", TICKET]
    piped = subprocess.PIPE
    job = subprocess.Popen(command, cwd=repo, env=env, stdout=piped, stderr=piped)
    deadline = time.monotonic() + 30
    while not (repo / "started-2.txt").exists():
        assert job.poll() is None and time.monotonic() < deadline, job.communicate()
        time.sleep(0.05)
    time.sleep(0.3)
    cancelled = time.monotonic()
    job.send_signal(signal.SIGINT)
    _, err = job.communicate(timeout=30)
    assert job.returncode == 3, err.decode()
    assert time.monotonic() - cancelled < 7.5
    assert b"cairn: warning" not in err, err.decode()
    written = step_summary(env)
    # without --remote the work is only on this runner: no re-run continues it, and it says so
    assert "was interrupted (signal)**\n" in written and "re-run this job" not in written
    assert "- **Pushed to:** nowhere: the run had no --remote" in written
    assert "- **Tasks done:** 1 of 2" in written
    (comment,) = github.comments_on(7)
    assert "re-run this job" not in comment and "attempt 1" in comment

    rerun = {**env, "GITHUB_RUN_ATTEMPT": "2"}
    done = cairn("resume", TICKET, cwd=repo, env=rerun)
    assert done.returncode == 0, done.stdout + done.stderr
    assert github.keys_on(7) == [KEY] and len(github.requests("POST", "/comments")) == 1
    (comment,) = github.comments_on(7)
    assert comment.startswith(f"**cairn: ticket {TICKET} completed**")
    assert "- **Tasks done:** 2 of 2" in comment and "attempt 2" in comment


def test_nothing_the_job_gives_makes_the_report_raise(tmp_path: Path, github: FakeGitHub) -> None:
    (tmp_path / "a-directory").mkdir()
    env = actions_env(
        tmp_path,
        github,
        GITHUB_STEP_SUMMARY=str(tmp_path / "a-directory"),
        GITHUB_OUTPUT=str(tmp_path / "missing" / "output"),
        GITHUB_API_URL="ftp://nowhere.invalid",
    )
    warnings = report(outcome(tmp_path, summary_path=str(tmp_path / "a-directory")), env)
    assert [w.split(" ")[:3] for w in warnings] == [
        ["the", "step's", "outputs"],
        ["the", "step", "summary"],
        ["the", "comment", "on"],
    ]
    assert all("\n" not in w for w in warnings)
