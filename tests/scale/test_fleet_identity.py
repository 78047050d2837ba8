"""One ticket, one workflow: the workflow id is keyed on the repository (``[fleet] id``, else
its root commit), not on how a clone spells the shared remote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers import assert_one_line_error, cairn, git
from scale import temporal_server
from scale.scale_setup import events, shared_repo


def started(user: Path, tickets: int) -> list[dict[str, Any]]:
    """The events of ``cairn fleet start --json`` (polling, no --once) until it said each
    ticket; then it is stopped. No worker is needed: a started workflow waits for one."""
    process = subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "start", "--json"],
        cwd=user,
        env=os.environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    seen: list[dict[str, Any]] = []
    try:
        while len([e for e in seen if "workflow_id" in e]) < tickets:
            line = process.stdout.readline()
            assert line, process.communicate(timeout=10)
            seen += events(line)
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    return seen


def test_clones_spelling_the_remote_differently_share_one_workflow_per_ticket(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    first = shared_repo(tmp_path, temporal.address, {"A-1": 1, "B-1": 1})
    bare = tmp_path / "shared.git"
    spellings = [f"file://{bare}", str(tmp_path / "shared")]  # a URL; a path with no .git
    ids = {e["ticket"]: e["workflow_id"] for e in started(first, 2)}
    assert len(set(ids.values())) == 2
    for n, spelling in enumerate(spellings):
        other = tmp_path / f"clone-{n}"
        git(tmp_path, "clone", "-q", spelling, str(other))
        (other / "cairn-queue").mkdir()
        for plan in (first / "cairn-queue").iterdir():
            (other / "cairn-queue" / plan.name).write_text(plan.read_text())
        again = started(other, 2)
        assert {e["ticket"]: e["workflow_id"] for e in again} == ids
        assert {e["event"] for e in again if "workflow_id" in e} == {"ticket_exists"}
    listed = cairn("fleet", "status", "--json", cwd=other)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert sorted(row["workflow_id"] for row in rows) == sorted(ids.values())
    paused = cairn("fleet", "pause", "A-1", "--no-wait", "--json", cwd=other)
    assert paused.returncode == 0, paused.stderr
    assert events(paused.stdout)[0]["workflow_id"] == ids["A-1"]


def test_a_configured_fleet_id_names_the_workflows(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    user = shared_repo(tmp_path, temporal.address, {"A-1": 1})
    config = user / "cairn.toml"
    config.write_text(config.read_text().replace("[fleet]\n", '[fleet]\nid = "acme app"\n'))
    bad = cairn("fleet", "status", cwd=user)
    assert_one_line_error(bad)
    assert "id 'acme app' is not a fleet id" in bad.stderr
    config.write_text(config.read_text().replace('"acme app"', '"acme-app"'))
    got = started(user, 1)
    assert got[-1]["workflow_id"] == "cairn:acme-app:A-1"
