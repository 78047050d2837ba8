"""Failures by whose fault they are (``cairn.scale.failures``), against the dev server:

- an outage of the shared remote (renamed away), at a 0.1 s backoff cap: the segment is
  retried (an infrastructure failure: without a count limit), status and the dashboard say
  ``waiting: <reason>`` (not running, not "waits for a worker"); once the remote is back the
  ticket completes, its detail the run's one-line summary;
- the ticket's own error (a configuration the worker refuses): it fails after
  ``[fleet] max_attempts`` segments, with its reason in status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

from cairn.errors import BadInput
from cairn.remote.refs import TicketRefs, push, remote_refs
from cairn.scale import failures
from cairn.scale.shared import ensure_clone
from helpers import git
from scale import temporal_server
from scale.scale_setup import (
    agent_env,
    dashboard,
    events,
    shared_repo,
    start_worker,
    status_rows,
    wait_for,
)

# The dev server retries an activity at most once a second whatever the backoff: the outage
# here lasts a few attempts; test_ticket_workflow.py (time skipping) goes past the old budget
# of 20 attempts.
OUTAGE_ATTEMPTS = 4


def fast_backoff(user: Path) -> None:
    """``[temporal] max_backoff = "0.1s"`` in the user's cairn.toml ([temporal] is its last
    section): the starter hands it to the workflows."""
    with (user / "cairn.toml").open("a") as config:
        config.write('max_backoff = "0.1s"\n')


def start_fleet(user: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
        cwd=user,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_a_remote_outage_waits_and_the_ticket_completes_once_it_is_back(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    ticket = "O-1"
    user = shared_repo(tmp_path, temporal.address, {ticket: 2})
    fast_backoff(user)
    bare, away = tmp_path / "shared.git", tmp_path / "shared.away"
    bare.rename(away)  # the remote is gone: every attempt fails to reach it
    env = agent_env(tmp_path)
    worker = start_worker(user, tmp_path / "w1", env)
    fleet = start_fleet(user, env)
    try:

        def waiting() -> dict[str, Any] | None:
            row = status_rows(user, env)[0].get(ticket)
            return row if row and (row["attempt"] or 0) >= OUTAGE_ATTEMPTS else None

        row = wait_for(f"attempt {OUTAGE_ATTEMPTS}", waiting)
        assert row["state"] == "retrying", row
        assert row["detail"].startswith("waiting: "), row
        assert "shared.git" in row["detail"] and "\n" not in row["detail"]
        assert "waits for a worker" not in row["detail"]
        with dashboard(user, env) as url:
            state = httpx2.get(f"{url}/api/v1/state").json()
            assert state["agents"]["running"] == 0  # a segment in backoff does not run
            (shown,) = state["tickets"]
            assert shown["detail"].startswith("waiting: ")
        away.rename(bare)  # the remote is back
        out, err = fleet.communicate(timeout=120)
        assert fleet.returncode == 0, (out, err)
        assert events(out.decode())[-1]["tickets"] == {ticket: "completed"}
    finally:
        if fleet.poll() is None:
            fleet.kill()
        worker.stop()
    rows, _ = status_rows(user, env)
    done = rows[ticket]
    assert done["state"] == "completed"
    assert done["detail"] == "completed: 2 of 2 tasks"  # the run's summary, not a JSON tail


def test_the_ticket_s_own_error_fails_it_after_max_attempts(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    ticket = "E-1"
    user = shared_repo(tmp_path, temporal.address, {ticket: 1})
    fast_backoff(user)
    # the remote's configuration is broken (the user's clone keeps a good one)
    seed = tmp_path / "breaker"
    git(tmp_path, "clone", "-q", str(tmp_path / "shared.git"), str(seed))
    (seed / "cairn.toml").write_text('[loop]\nphases = "implement"\n')
    git(seed, "commit", "-qam", "a broken config")
    git(seed, "push", "-q", "origin", "HEAD")
    env = agent_env(tmp_path)
    worker = start_worker(user, tmp_path / "w1", env)
    fleet = start_fleet(user, env)
    try:
        out, err = fleet.communicate(timeout=60)
        assert fleet.returncode == 1, (out, err)
        assert events(out.decode())[-1]["tickets"] == {ticket: "failed"}
    finally:
        if fleet.poll() is None:
            fleet.kill()
        worker.stop()
    row = status_rows(user, env)[0][ticket]
    assert row["state"] == "failed" and row["segments"] == 3, row
    assert "phases" in row["detail"] and "(3 of 3 attempts failed)" in row["detail"], row


def test_failures_are_classified_by_whose_fault_they_are(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(remote), str(seed))
    git(seed, "commit", "-q", "--allow-empty", "-m", "first")
    git(seed, "push", "-q", "origin", "HEAD:refs/heads/main")
    clone = ensure_clone(str(remote), tmp_path / "clone")
    refs = TicketRefs.of("C-1")
    remote.rename(tmp_path / "gone.git")
    with pytest.raises(Exception) as unreachable:
        remote_refs(clone, refs.all())
    head = clone.out(["rev-parse", "HEAD"]).strip()
    with pytest.raises(Exception) as refused_push:
        push(clone, {refs.branch: head}, {})
    for exc in (unreachable.value, refused_push.value, OSError(28, "No space left on device")):
        error = failures.classify(exc)
        assert error.type == failures.INFRA and not error.non_retryable, exc
    own = failures.classify(BadInput("[loop] phases: not a list; fix cairn.toml"))
    assert own.type == failures.TICKET and own.non_retryable
    assert own.message == "[loop] phases: not a list; fix cairn.toml"
    assert failures.classify(ValueError("a bug")).type == failures.TICKET


def test_a_segment_s_detail_is_its_run_s_outcome_in_one_line(tmp_path: Path) -> None:
    from cairn.scale.segment import _tail

    log = tmp_path / "T-1.log"
    said = {"ticket": "T-1", "run": "r", "status": "interrupted", "exit_code": 3}
    said |= {"reason": "turn_cap", "error": None, "summary_path": str(tmp_path / "none.md")}
    refused = {"error": {"message": "no tasks found in plan.md; add ### Task 1", "exit_code": 2}}
    cases = [
        (said, "interrupted: turn_cap"),
        (refused, "refused: no tasks found in plan.md; add ### Task 1"),
    ]
    for line, detail in cases:
        log.write_text('{"event": "phase"}\n' + json.dumps(line) + "\n")
        assert _tail(log) == detail
    log.write_text("a last line that is no outcome\n")
    assert _tail(log) == "a last line that is no outcome"
