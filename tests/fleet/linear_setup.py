"""Helpers of the linear tracker's tests (not a test module): a repository whose fleet reads
the fake Linear's team IDE, and the tracker it opens."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from cairn import config as config_module
from cairn.fleet.trackers import LinearTracker, open_tracker
from cairn.git import Repo
from cairn.state.layout import Layout
from fleet.fake_linear import FakeLinear
from fleet.fleet_setup import AGENT
from helpers import git, make_repo

BRANCH_URL = "https://git.test/acme/app/tree/{branch}"


def project(tmp_path: Path, linear: FakeLinear, push: bool = True, extra: str = "") -> Path:
    """A repository whose fleet reads team IDE's issues on ``linear``, runs the fleet agent
    (one task a turn, committed), and pushes to a bare ``origin``."""
    config = (
        "[agent]\n"
        'kind = "command"\n'
        f"command = {json.dumps([sys.executable, str(AGENT)])}\n"
        "max_turns = 3\nbudget_pressure_turns = 1\nmax_continuations = 0\n"
        "cutoff_timeout_ms = 3000\n\n"
        '[loop]\nphases = ["implement"]\n\n'
        '[fleet]\ntracker = "linear"\nconcurrency = 2\nmax_attempts = 2\nretry_backoff = "1s"\n'
        f'poll_interval = "1s"\nmin_free_memory = "1MiB"\npush = {json.dumps(push)}\n\n'
        f'[fleet.linear]\nteam = "IDE"\napi_url = "{linear.url}"\nbranch_url = "{BRANCH_URL}"\n'
        + extra
    )
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n", "cairn.toml": config})
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(tmp_path / "origin.git"))
    git(repo, "remote", "add", "origin", str(tmp_path / "origin.git"))
    git(repo, "push", "-q", "origin", "main")
    return repo


def tracker_for(repo: Path) -> tuple[LinearTracker, Layout]:
    found = Repo.discover(repo)
    cfg = config_module.load(found.toplevel)
    layout = Layout.for_repo(found, cfg)
    tracker = open_tracker(found, cfg, layout)
    assert isinstance(tracker, LinearTracker)
    tracker.api.backoff = 0.05  # the retries' pace, not their number, is shortened
    return tracker, layout


def outbox(repo: Path) -> list[dict[str, Any]]:
    directory = repo / ".git/cairn/fleet/outbox"
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]
