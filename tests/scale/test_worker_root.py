"""A worker's root stays bounded (issue 23, item 7): a second worker on a live worker's root is
refused with nothing touched, a worker that starts on the root of a SIGKILLed one stops the run
and agent it left and sweeps its leftovers, and nothing of a finished ticket stays (also checked
after four tickets through one worker in test_segment_liveness.py); the worker's clone is
garbage-collected, never beside a rebuild."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cairn.scale import roots, shared
from cairn.scale.workspace import CLONE_LOCK
from cairn.util import procs
from helpers import assert_one_line_error, cairn, git, make_repo
from scale import temporal_server
from scale.scale_setup import (
    agent_env,
    agent_log,
    events,
    leftovers,
    shared_repo,
    start_worker,
    wait_for,
)

TICKET = "R-1"


def gone(pid: int) -> bool:
    return not procs.pid_alive(pid)


def test_a_new_worker_sweeps_what_a_killed_one_left(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    user = shared_repo(tmp_path, temporal.address, {TICKET: 1}, "2s")
    env = agent_env(tmp_path, SCALE_AGENT_SLEEP=f"{TICKET}:1", SCALE_AGENT_PAUSE="600")
    root = tmp_path / "w1"
    first = start_worker(user, root, env, "--concurrency", "1")
    fleet = subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
        cwd=user,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    later = None
    try:
        asleep = wait_for(
            "the agent to sleep",
            lambda: [e for e in agent_log(env, TICKET) if e["event"] == "sleep"],
        )[0]
        run_pid = int(json.loads((root / ".pids" / f"{TICKET}.json").read_text())["pid"])

        # a second worker on the live worker's root: one line, exit 2, nothing touched
        before = sorted(p.name for p in root.iterdir())
        refused = cairn("worker", "--workspace-root", str(root), cwd=user, env=env)
        assert_one_line_error(refused)
        assert f"workspace root {root} is used by a live worker" in refused.stderr
        assert sorted(p.name for p in root.iterdir()) == before
        assert (root / TICKET).is_dir() and not gone(run_pid) and not gone(asleep["pid"])

        first.process.kill()  # the worker only: its run and agent live on
        first.process.wait()
        later = start_worker(user, root, env, "--concurrency", "1")
        assert later.started["swept"] == 1
        assert gone(run_pid) and gone(asleep["pid"])  # stopped before the worker polled

        out, err = fleet.communicate(timeout=90)
        assert fleet.returncode == 0, (out, err)
        assert events(out.decode())[-1]["tickets"] == {TICKET: "completed"}
    finally:
        if fleet.poll() is None:
            fleet.kill()
        first.stop()
        if later is not None:
            later.stop()
    done = [e["task"] for e in agent_log(env, TICKET) if e["event"] == "done"]
    assert done == [1]
    assert leftovers(root) == []


def test_the_worker_s_clone_is_garbage_collected_but_never_beside_a_rebuild(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    # a clone whose objects are all loose, past its auto-gc threshold (cairn's git has it off;
    # git estimates the count from one of 256 directories: five times is past it for sure)
    clone = make_repo(root / "repo-0123456789ab", {})
    git(clone, "config", "gc.auto", "256")  # git's default is 6700: the clone's own setting wins
    for n in range(5 * 256):
        (clone / f"f{n}.txt").write_text(f"{n}\n")
    git(clone, "-c", "gc.auto=0", "add", "-A")  # (the test's git would gc in the background)
    git(clone, "-c", "gc.auto=0", "commit", "-q", "-m", "many")
    assert loose(clone) > 5 * 256
    with shared.locked(root / CLONE_LOCK, exclusive=False):  # a rebuild holds the clone
        assert roots.collect(root) is False
    assert loose(clone) > 5 * 256
    assert roots.collect(root) is True
    assert loose(clone) == 0  # packed


def loose(clone: Path) -> int:
    counts = dict(line.split(": ") for line in git(clone, "count-objects", "-v").splitlines())
    return int(counts["count"])
