"""``cairn fleet start --once`` waits out a Temporal restart: it says so once and goes on to the
tickets' outcomes (a dev server of this test's own, restarted on its ports and database)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from cairn.terms import ENV_TEMPORAL_RECONNECT_CAP
from scale import temporal_server
from scale.scale_setup import agent_env, agent_log, events, shared_repo, start_worker

DOWN = 12.0


def test_fleet_start_once_survives_a_temporal_restart(tmp_path: Path) -> None:
    server = temporal_server.start(tmp_path / "temporal")
    worker = None
    fleet = None
    try:
        user = shared_repo(tmp_path, server.address, {"R-1": 2}, heartbeat="10s")
        env = agent_env(tmp_path, SCALE_AGENT_SLEEP="R-1:1", SCALE_AGENT_PAUSE="6")
        worker = start_worker(user, tmp_path / "w1", env)
        fleet = subprocess.Popen(
            [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
            cwd=user,
            env={**os.environ, **env, ENV_TEMPORAL_RECONNECT_CAP: "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while not any(e["event"] == "sleep" for e in agent_log(env, "R-1")):
            assert time.monotonic() < deadline and fleet.poll() is None, "the agent never slept"
            time.sleep(0.2)
        # down longer than the client's own retries (10 s): the command sees the outage
        server = temporal_server.restart(server, down=DOWN)
        out, err = fleet.communicate(timeout=120)
        seen = events(out.decode())
        assert fleet.returncode == 0, (out, err)
        said = [e for e in seen if e["event"] == "temporal_unreachable"]
        assert len(said) == 1 and said[0]["address"] == server.address, seen
        assert "internal error" not in err.decode()
        assert seen[-1]["tickets"] == {"R-1": "completed"}
    finally:
        if fleet is not None and fleet.poll() is None:
            fleet.kill()
        if worker is not None:
            worker.stop()
        server.stop()
