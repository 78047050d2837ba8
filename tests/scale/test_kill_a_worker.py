"""A worker is lost mid-task: the heartbeat timeout fires, the other worker process takes the
segment as attempt 2, rebuilds the worktree from the refs the lost one pushed (the untracked
file of the task in progress included), and finishes the ticket without redoing the task
completed before the loss. Three ways to lose it:

- ``machine``: SIGKILL of the worker, its run and its agent (the machine died);
- ``worker``: SIGKILL of the worker process only: its run and agent live on, on the same host as
  the survivor, which must stop them;
- ``partition``: SIGSTOP of the worker (cut off, not dead), SIGCONT once the survivor took the
  ticket: the zombie must not move the remote's refs after the survivor's claim;
- ``shutdown``: SIGTERM to the worker (a deploy, a scale-down): it stops its run, which
  snapshots, pushes, hands the segment back and exits 0."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.scale.messages import workflow_id
from helpers import git
from scale import temporal_server
from scale.scale_setup import (
    agent_env,
    agent_log,
    alive,
    events,
    query_status,
    shared_repo,
    start_worker,
    wait_for,
)

TICKET = "K-1"


def snapshot_holds(bare: Path, path: str) -> bool:
    ref = f"refs/cairn/wip/{TICKET}"
    if not git(bare, "rev-parse", "--verify", "-q", ref, check=False).strip():
        return False
    return path in git(bare, "ls-tree", "-r", "--name-only", ref).split()


def state_attempts(bare: Path) -> list[int]:
    """The generations of the ticket's state commits on the remote, oldest first."""
    body = git(
        bare,
        "log",
        "--reverse",
        "--format=%(trailers:key=Cairn-Generation,valueonly)",
        f"refs/cairn/state/{TICKET}",
    )
    return [int(line) for line in body.split() if line.strip()]


@pytest.mark.parametrize("loss", ["machine", "worker", "partition", "shutdown"])
def test_a_lost_worker_s_task_is_resumed_elsewhere_from_the_pushed_snapshot(
    tmp_path: Path, temporal: temporal_server.DevServer, loss: str
) -> None:
    user = shared_repo(tmp_path, temporal.address, {TICKET: 3}, heartbeat="3s")
    bare = tmp_path / "shared.git"
    env = agent_env(tmp_path, SCALE_AGENT_SLEEP=f"{TICKET}:2", SCALE_AGENT_PAUSE="600")
    workers = {name: start_worker(user, tmp_path / name, env) for name in ("w1", "w2")}
    fleet = subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
        cwd=user,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        asleep = wait_for(
            "the agent to sleep in task 2",
            lambda: [e for e in agent_log(env, TICKET) if e["event"] == "sleep"],
        )[0]
        # the untracked file of task 2 reaches the remote with a heartbeat's checkpoint
        wait_for("the snapshot", lambda: snapshot_holds(bare, f"work/{TICKET}-task-2.txt"))
        doomed = next(n for n, w in workers.items() if asleep["cwd"].startswith(str(w.root)))
        lost = workers[doomed]
        run_pid = int(json.loads((lost.root / ".pids" / f"{TICKET}.json").read_text())["pid"])
        if loss == "machine":
            lost.kill()
            with contextlib.suppress(ProcessLookupError):
                os.kill(asleep["pid"], signal.SIGKILL)  # the agent has a process group of its own
        elif loss == "worker":
            lost.process.kill()
            lost.process.wait()
        elif loss == "shutdown":
            lost.process.send_signal(signal.SIGTERM)
            assert lost.process.wait(timeout=30) == 0
            said = lost.root.with_suffix(".log").read_text()  # one line, not a traceback
            assert f"cairn: {TICKET}: attempt 1 cancelled: the worker shuts down" in said
            assert "Traceback" not in said, said
        else:
            lost.process.send_signal(signal.SIGSTOP)
            wait_for(
                "the survivor to find the restored file",
                lambda: [e for e in agent_log(env, TICKET) if e["event"] == "found"],
            )
            lost.process.send_signal(signal.SIGCONT)
        if loss != "machine":  # the survivor stopped the run and agent left on this host
            wait_for("the earlier run to stop", lambda: not alive(run_pid), timeout=30)
            wait_for("the earlier agent to stop", lambda: not alive(asleep["pid"]), timeout=30)

        out, err = fleet.communicate(timeout=120)
        assert fleet.returncode == 0, (out, err)
        assert events(out.decode())[-1]["tickets"] == {TICKET: "completed"}
        # the workflow's query (answered by a live worker): the last segment was a retry
        started = [e for e in events(out.decode()) if e["event"] == "ticket_started"]
        assert started[0]["workflow_id"] == workflow_id(
            git(bare, "rev-list", "--max-parents=0", "HEAD").strip()[:16], TICKET
        )
        state = asyncio.run(query_status(temporal.address, started[0]["workflow_id"]))
        assert state["state"] == "completed" and state["attempt"] >= 2
    finally:
        if fleet.poll() is None:
            fleet.kill()
        for worker in workers.values():
            worker.stop()

    survivor = workers["w2" if doomed == "w1" else "w1"]
    if loss == "partition":  # the zombie says why it stopped in a line, not a traceback
        said = lost.root.with_suffix(".log").read_text()
        lines = ("K-1: attempt 1 cancelled: timed out at the server", "K-1: attempt 1 stops: ")
        assert any(f"cairn: {line}" in said for line in lines), said
        assert "Traceback" not in said, said
    log = agent_log(env, TICKET)
    done = [e["task"] for e in log if e["event"] == "done"]
    assert done == [1, 2, 3]  # task 1, completed before the kill, is not redone
    (found,) = [e for e in log if e["event"] == "found"]
    assert found["task"] == 2 and found["cwd"].startswith(str(survivor.root))
    assert found["content"] == f"{TICKET} task 2\n"  # restored from the dead worker's snapshot
    files = git(bare, "ls-tree", "-r", "--name-only", f"cairn/{TICKET}").split()
    assert {f"work/{TICKET}-task-{n}.txt" for n in (1, 2, 3)} <= set(files)
    attempts = state_attempts(bare)  # no push of an older attempt after a newer one's claim
    assert attempts == sorted(attempts) and attempts[0] == 1 and attempts[-1] >= 2
