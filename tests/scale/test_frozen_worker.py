"""A worker frozen (SIGSTOP: a VM pause, a swap storm) while its agent reports a task done: the
checkpoint barrier fails closed. ``cairn task done`` is not confirmed, exits 3 with a line the
agent reads, and the run stops; the retry elsewhere redoes only that task, never one completed
on the remote; the frozen worker, thawed, pushes nothing over the retry's claim. The retry's
run, stopped (interrupted), makes the ticket's second segment: at Temporal attempt 1 after a
first segment that ran to attempt 2 or more, it claims the next generation instead of being
fenced by its predecessor."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

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

TICKET = "Z-1"


def completed_on_remote(bare: Path) -> set[int]:
    ref = f"refs/cairn/state/{TICKET}"
    done: set[int] = set()
    for name in git(bare, "ls-tree", "-r", "--name-only", ref).split():
        if name.endswith("run-log.jsonl"):
            for line in git(bare, "show", f"{ref}:{name}").splitlines():
                event = json.loads(line)
                if event.get("event") == "task" and event.get("status") == "completed":
                    done.add(int(event["task"]))
    return done


def generations(bare: Path) -> list[int]:
    body = git(
        bare,
        "log",
        "--reverse",
        "--format=%(trailers:key=Cairn-Generation,valueonly)",
        f"refs/cairn/state/{TICKET}",
    )
    return [int(line) for line in body.split()]


def test_a_frozen_worker_s_task_done_fails_closed_and_the_run_stops(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    # a 3 s heartbeat timeout: the runs' reports wait 4 of them (12 s) for a checkpoint
    user = shared_repo(tmp_path, temporal.address, {TICKET: 3}, heartbeat="3s")
    bare = tmp_path / "shared.git"
    # task 2 sleeps 3 s (the worker is frozen then), task 3 until its run is stopped
    env = agent_env(tmp_path, SCALE_AGENT_SLEEP=f"{TICKET}:2:3,{TICKET}:3:600")
    frozen = start_worker(user, tmp_path / "w1", env)
    workers = [frozen]
    fleet = subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
        cwd=user,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        asleep = wait_for(
            "task 2 to begin", lambda: [e for e in agent_log(env, TICKET) if e["event"] == "sleep"]
        )[0]
        frozen.process.send_signal(signal.SIGSTOP)
        run_pid = int(json.loads((frozen.root / ".pids" / f"{TICKET}.json").read_text())["pid"])
        (refused,) = wait_for(
            "task done to fail",
            lambda: [e for e in agent_log(env, TICKET) if e["event"] == "unconfirmed"],
            timeout=90,  # 3 s of task, 12 s of wait: the rest is a loaded machine's slack
        )
        assert (refused["task"], refused["rc"]) == (2, 3)
        assert refused["err"].startswith("cairn: error: task 2 completed is recorded here but")
        assert (
            "not confirmed; the run stops: the ticket resumes from what the remote"
            in (refused["err"])
        )
        wait_for("the run to stop", lambda: not alive(run_pid), timeout=15)
        wait_for("its agent to stop", lambda: not alive(asleep["pid"]), timeout=15)
        assert completed_on_remote(bare) == {1}  # task 2's completion never reached it

        workers.append(start_worker(user, tmp_path / "w2", env))
        wait_for(
            "the retry to start task 2",
            lambda: [
                e for e in agent_log(env, TICKET) if e["cwd"].startswith(str(tmp_path / "w2"))
            ],
        )
        frozen.process.send_signal(signal.SIGCONT)  # thawed: its attempt is over
        (third,) = wait_for(
            "task 3 to begin",
            lambda: [e for e in agent_log(env, TICKET) if e["event"] == "sleep" and e["task"] == 3],
        )
        # the run ends interrupted (SIGTERM): the ticket's next segment starts at attempt 1
        root = next(w.root for w in workers if third["cwd"].startswith(f"{w.root}/"))
        run = json.loads((root / ".pids" / f"{TICKET}.json").read_text())["pid"]
        os.kill(int(run), signal.SIGTERM)
        out, err = fleet.communicate(timeout=90)
        assert fleet.returncode == 0, (out, err)
        assert events(out.decode())[-1]["tickets"] == {TICKET: "completed"}
        (wid,) = [e["workflow_id"] for e in events(out.decode()) if e["event"] == "ticket_started"]
        state = asyncio.run(query_status(temporal.address, wid))
        # the second segment ran at attempt 1, not fenced by the first one's attempt 2
        assert state["segments"] >= 2 and state["attempt"] == 1, state
    finally:
        if fleet.poll() is None:
            fleet.kill()
        frozen.process.send_signal(signal.SIGCONT)
        for worker in workers:
            worker.stop()

    log = agent_log(env, TICKET)
    done = [e for e in log if e["event"] == "done"]  # an agent killed under load logs none
    tasks = [e["task"] for e in done]
    assert len(tasks) == len(set(tasks)) and all(e["rc"] == 0 for e in done)  # none redone
    assert completed_on_remote(bare) == {1, 2, 3}  # none redone, none lost
    moves = generations(bare)
    assert moves == sorted(moves) and moves[-1] >= 3  # no older generation came back
