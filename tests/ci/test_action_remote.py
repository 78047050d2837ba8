"""The action's run step as a job runs it, with the real cairn and `--remote` (needs the lead's
`--remote`): a job cancelled mid-task (SIGINT to the step's process, which the step exec'd into
cairn) pushes and reports in time; a re-run of the job in a fresh clone resumes and completes
without redoing a task, and edits the one comment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ci.test_actions_report import KEY, TICKET, actions_env, step_summary
from fleet.fake_github import TOKEN, FakeGitHub, serve
from helpers import git, scripted_project, snapshot_files
from test_action import step, step_env

ISSUE_BODY = "- [ ] One\n- [ ] Two\n"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    fake.add_issue(7, "Two tasks", ISSUE_BODY)
    yield from serve(fake)


def job(
    tmp_path: Path, github: FakeGitHub, bare: Path, name: str, attempt: str
) -> tuple[Path, dict[str, str], list[str]]:
    """A runner's checkout of the shared remote, and the run step's environment and command."""
    clone = tmp_path / name
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    git(clone, "config", "user.name", "github-actions[bot]")
    git(clone, "config", "user.email", "bot@example.com")
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        (bin_dir / "cairn").write_text(f'#!/bin/sh\nexec {sys.executable} -m cairn "$@"\n')
        (bin_dir / "cairn").chmod(0o755)
        (bin_dir / "python").symlink_to(sys.executable)
    found = step("run")
    script = tmp_path / "run-step.sh"
    script.write_text(found["run"])
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"issue": {"number": 7, "title": "Two tasks", "body": ISSUE_BODY}}))
    env = {
        **os.environ,
        **actions_env(tmp_path, github, GITHUB_RUN_ATTEMPT=attempt),
        **step_env(found, {"github-token": TOKEN}),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "RUNNER_TEMP": str(tmp_path / f"{name}-temp"),
    }
    (tmp_path / f"{name}-temp").mkdir()
    return clone, env, ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)]


def cancel_as_the_runner(proc: subprocess.Popen[bytes]) -> list[int]:
    """GitHub's runner cancelling a step (actions/runner ProcessInvoker): SIGINT to the step's
    process group, SIGTERM 7.5 s later if it still runs, SIGKILL 2.5 s after that. Returns the
    signals it had to send."""
    sent: list[int] = []
    for signum, wait in ((signal.SIGINT, 7.5), (signal.SIGTERM, 2.5), (signal.SIGKILL, 5.0)):
        os.killpg(proc.pid, signum)
        sent.append(signum)
        try:
            proc.wait(timeout=wait)
            return sent
        except subprocess.TimeoutExpired:
            continue
    return sent


def test_a_cancelled_job_rerun_continues_in_a_fresh_clone(
    tmp_path: Path, github: FakeGitHub
) -> None:
    script: dict[str, Any] = {
        "coder": [
            [
                {"cairn": ["task", "done", "0"]},
                {"write": {"path": "two.txt", "content": "half\n"}},
                {"sleep": 60},
            ],
            [{"write": {"path": "two.txt", "content": "two\n"}}, {"cairn": ["task", "done", "1"]}],
        ]
    }
    repo, _ = scripted_project(tmp_path, script, ticket=TICKET, max_continuations=1)
    bare = tmp_path / "shared.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    git(repo, "push", "-q", "origin", "main")

    first, env, command = job(tmp_path, github, bare, "job1", "1")
    proc = subprocess.Popen(
        command,
        cwd=first,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # the step's process group, as the runner's
    )
    deadline = time.monotonic() + 60
    while not (first / "two.txt").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(1.0)
    sent = cancel_as_the_runner(proc)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, (out + err).decode()
    assert sent == [signal.SIGINT], sent  # done before the runner's SIGTERM was due
    wip = git(bare, "rev-parse", f"refs/cairn/wip/{TICKET}").strip()
    assert snapshot_files(bare, wip)["two.txt"] == b"half\n"
    assert "was interrupted (signal)** — re-run this job to continue." in step_summary(env)
    (comment,) = github.comments_on(7)
    assert "- **Tasks done:** 1 of 2" in comment and "re-run this job" in comment

    second, env, command = job(tmp_path, github, bare, "job2", "2")
    done = subprocess.run(command, cwd=second, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cairn: ticket GH-7 on origin: interrupted" in done.stdout
    assert (second / "two.txt").read_text() == "two\n"
    assert github.keys_on(7) == [KEY] and len(github.requests("POST", "/comments")) == 1
    (comment,) = github.comments_on(7)
    assert comment.startswith(f"**cairn: ticket {TICKET} completed**")
    assert "- **Tasks done:** 2 of 2" in comment and "attempt 2" in comment
    # a third run of the job finds the ticket done and runs nothing
    third, env, command = job(tmp_path, github, bare, "job3", "3")
    done = subprocess.run(command, cwd=third, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is done already" in done.stdout
