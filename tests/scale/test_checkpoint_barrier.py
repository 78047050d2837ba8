"""A task's completion is on the shared remote when ``cairn task done`` returns on a worker: the
worker checkpoints at once when asked (``cairn.util.barrier``), not only every
``heartbeat_timeout / 3``, so a machine that dies just after a task was done does not take the
completion with it (the scale bench found that task redone after such a kill)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from cairn.terms import ENV_CHECKPOINT_DIR, ENV_CHECKPOINT_WAIT
from cairn.util import barrier
from helpers import assert_one_line_error, cairn, git, hold_run
from scale import temporal_server
from scale.scale_setup import agent_env, agent_log, events, shared_repo, start_worker

TICKET = "B-1"


def test_without_a_worker_nothing_waits(tmp_path: Path) -> None:
    assert barrier.wait_for_checkpoint({}) is True
    started = time.monotonic()
    asks = tmp_path / "asks"
    barrier.reset(asks)
    assert barrier.wait_for_checkpoint({ENV_CHECKPOINT_DIR: str(asks)}, timeout=0.3) is False
    assert time.monotonic() - started < 2
    assert barrier.pending(asks) == []  # a request nobody answered is taken back


def test_an_unconfirmed_report_exits_3_with_a_line_and_stops_its_run(
    tmp_path: Path, repo: Path
) -> None:
    """Nobody serves the checkpoint directory (a frozen worker): ``cairn task done`` does not
    report success; it says why in one line, exits 3 and stops the run its marker names."""
    run, _ = hold_run(repo, "B-2", ["one", "two"])
    try:
        asks = tmp_path / "asks"
        barrier.reset(asks)
        env = {ENV_CHECKPOINT_DIR: str(asks), ENV_CHECKPOINT_WAIT: "1.5"}
        started = time.monotonic()
        done = cairn("task", "done", "0", "--ticket", "B-2", cwd=repo, env=env)
        assert 1.5 <= time.monotonic() - started < 10
        assert_one_line_error(done, 3)
        assert "task 0 completed is recorded here but the worker did not push it" in done.stderr
        assert "within 1.5s, so it is not confirmed; the run stops" in done.stderr
        assert run.wait(timeout=10) == -signal.SIGTERM  # the run that owns the ticket
        assert barrier.pending(asks) == []  # the request is taken back
        skipped = cairn("task", "skip", "1", "--notes", "n", "--ticket", "B-2", cwd=repo, env=env)
        assert_one_line_error(skipped, 3)  # no run left to stop: it says to stop it
        assert "task 1 skipped is recorded here" in skipped.stderr
        assert "not confirmed; stop this run" in skipped.stderr
    finally:
        run.kill()
        run.wait()


def test_a_worker_waits_four_heartbeat_timeouts(tmp_path: Path) -> None:
    assert barrier.wait_after(30.0) == 120.0 == barrier.waiting_time({})
    assert barrier.waiting_time({ENV_CHECKPOINT_WAIT: "8"}) == 8.0
    assert barrier.waiting_time({ENV_CHECKPOINT_WAIT: "soon"}) == barrier.WAIT


def test_a_request_returns_once_released(tmp_path: Path) -> None:
    asks = tmp_path / "asks"
    barrier.reset(asks)
    answered: list[bool] = []
    asker = threading.Thread(
        target=lambda: answered.append(barrier.wait_for_checkpoint({ENV_CHECKPOINT_DIR: str(asks)}))
    )
    asker.start()
    deadline = time.monotonic() + 10
    while not barrier.pending(asks):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.2)
    assert asker.is_alive()  # it waits for the checkpoint
    barrier.release(barrier.pending(asks))
    asker.join(5)
    assert answered == [True]


def completions_on_remote(bare: Path, task: int) -> int:
    ref = f"refs/cairn/state/{TICKET}"
    if not git(bare, "rev-parse", "--verify", "-q", ref, check=False).strip():
        return 0
    count = 0
    for name in git(bare, "ls-tree", "-r", "--name-only", ref).split():
        if name.endswith("run-log.jsonl"):
            for line in git(bare, "show", f"{ref}:{name}").splitlines():
                event = json.loads(line)
                if event.get("event") == "task" and event.get("task") == task:
                    count += event.get("status") == "completed"
    return count


def test_a_done_task_is_on_the_remote_when_task_done_returns(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    # a heartbeat timeout of 30 s: the periodic checkpoint comes every 10 s, long after task 1
    user = shared_repo(tmp_path, temporal.address, {TICKET: 2}, heartbeat="30s")
    bare = tmp_path / "shared.git"
    env = agent_env(tmp_path, SCALE_AGENT_SLEEP=f"{TICKET}:2", SCALE_AGENT_PAUSE="3")
    worker = start_worker(user, tmp_path / "w1", env)
    fleet = subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
        cwd=user,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not [e for e in agent_log(env, TICKET) if e["event"] == "done"]:
            assert time.monotonic() < deadline, "task 1 was not done"
            time.sleep(0.05)
        # the agent logs `done` after `cairn task done 1` returned: the remote has it already
        assert completions_on_remote(bare, 1) == 1
        out, err = fleet.communicate(timeout=90)
        assert fleet.returncode == 0, (out, err)
        assert events(out.decode())[-1]["tickets"] == {TICKET: "completed"}
    finally:
        if fleet.poll() is None:
            fleet.kill()
        worker.stop()
