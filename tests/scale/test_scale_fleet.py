"""The fleet on Temporal end to end: a bare repository as the shared remote, real worker
processes, `cairn fleet start --engine temporal --once`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from helpers import assert_one_line_error, cairn, git, untouched_state
from scale import temporal_server
from scale.scale_setup import agent_env, agent_log, events, shared_repo, start_worker


def test_a_queue_runs_on_a_worker_and_lands_on_the_remote(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    user = shared_repo(tmp_path, temporal.address, {"A-1": 2, "B-1": 3})
    env = agent_env(tmp_path)
    worker = start_worker(user, tmp_path / "w1", env)
    try:
        result = cairn("fleet", "start", "--once", "--json", cwd=user, env=env)
        assert result.returncode == 0, (result.stdout, result.stderr)
        seen = events(result.stdout)
        assert {e["ticket"] for e in seen if e["event"] == "ticket_started"} == {"A-1", "B-1"}
        assert seen[-1] == {
            "event": "fleet_finished",
            "exit_code": 0,
            "tickets": {"A-1": "completed", "B-1": "completed"},
            "refused": 0,
        }
        bare = tmp_path / "shared.git"
        for ticket, tasks in (("A-1", 2), ("B-1", 3)):
            files = git(bare, "ls-tree", "-r", "--name-only", f"cairn/{ticket}").split()
            assert {f"work/{ticket}-task-{n}.txt" for n in range(1, tasks + 1)} <= set(files)
            assert git(bare, "rev-parse", "--verify", f"refs/cairn/state/{ticket}").strip()
            done = [e["task"] for e in agent_log(env, ticket) if e["event"] == "done"]
            assert done == list(range(1, tasks + 1))

        again = cairn("fleet", "start", "--once", "--json", cwd=user, env=env)
        assert again.returncode == 0, (again.stdout, again.stderr)
        kinds = [e["event"] for e in events(again.stdout)]
        assert kinds.count("ticket_exists") == 2 and "ticket_started" not in kinds
    finally:
        worker.stop()
    assert worker.process.returncode == 0


def test_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    user = shared_repo(tmp_path, f"127.0.0.1:{temporal_server.free_port()}", {"A-1": 1})
    before = untouched_state(user)
    refused = cairn("worker", "--engine", "embedded", cwd=user)
    assert_one_line_error(refused)
    assert "cairn worker runs the temporal engine only" in refused.stderr
    unknown = cairn("fleet", "start", "--engine", "celery", "--once", cwd=user)
    assert_one_line_error(unknown)
    assert "--engine 'celery' is not an engine" in unknown.stderr
    nowhere = cairn("fleet", "start", "--once", cwd=user)
    assert_one_line_error(nowhere)
    assert "cannot reach Temporal at 127.0.0.1:" in nowhere.stderr
    assert untouched_state(user) == before
    (user / "cairn.toml").write_text(
        (user / "cairn.toml").read_text().replace("[fleet]\n", '[fleet]\nbase = "release"\n')
    )
    no_base = cairn("fleet", "start", "--once", cwd=user)
    assert_one_line_error(no_base)
    assert "[fleet] base 'release' is not a branch of" in no_base.stderr
    git(user, "checkout", "-q", "cairn.toml")
    git(user, "remote", "remove", "origin")
    before = untouched_state(user)
    no_remote = cairn("fleet", "start", "--once", cwd=user)
    assert_one_line_error(no_remote)
    assert "[fleet] remote 'origin' is not a remote of" in no_remote.stderr
    assert untouched_state(user) == before


def test_without_once_it_polls_the_queue_until_sigterm(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    user = shared_repo(tmp_path, temporal.address, {"A-1": 1})
    env = agent_env(tmp_path)
    worker = start_worker(user, tmp_path / "w1", env)
    fleet = subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "start", "--json"],
        cwd=user,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def done(ticket: str) -> list[dict[str, object]]:
            return [e for e in agent_log(env, ticket) if e["event"] == "done"]

        wait_until(lambda: done("A-1"))
        # a plan added while it runs is picked up at the next poll (poll_interval = 1s)
        (user / "cairn-queue" / "B-1.md").write_text(
            "# Plan: B-1\n\n### Task 1: Step 1\n\nDo it.\n"
        )
        wait_until(lambda: done("B-1"))
        fleet.send_signal(signal.SIGTERM)
        out, err = fleet.communicate(timeout=30)
    finally:
        if fleet.poll() is None:
            fleet.kill()
        worker.stop()
    assert fleet.returncode == 3, (out, err)
    started = [e["ticket"] for e in events(out) if e["event"] == "ticket_started"]
    assert started == ["A-1", "B-1"]  # each once, though the queue was read at every poll


def wait_until(check: Callable[[], object], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)
