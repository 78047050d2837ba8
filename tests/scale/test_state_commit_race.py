"""The run state is committed while the run writes it: an atomic write's temp file
(``.tmp.<name>.<pid>.<rand>``) can appear and be renamed away between git's listing of the
directory and its look at the file. That must never fail the checkpoint (the scale bench saw
``git add`` fail on such a file, which failed the segment and left its agent running)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from cairn.git import base_runner
from cairn.remote import statecommit
from cairn.util import durable
from helpers import git


def test_a_state_commit_ignores_temp_files_that_come_and_go(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    state = repo / ".git" / "cairn" / "tickets" / "T-1"
    (state / "run").mkdir(parents=True)
    durable.atomic_write(state / "run" / "run-log.jsonl", "{}\n")
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            durable.atomic_write(state / ".in-progress.yaml", f"n: {n}\n", fsync=False)
            durable.atomic_write(state / "run" / "summary.md", f"{n}\n", fsync=False)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        runner = base_runner(repo)
        parent = None
        deadline = time.monotonic() + 4
        commits = 0
        while time.monotonic() < deadline:
            parent = statecommit.commit(runner, state, parent, "T-1", statecommit.Claim(1, 1))
            commits += 1
    finally:
        stop.set()
        thread.join()
    assert parent is not None and commits > 10
    names = git(repo, "ls-tree", "-r", "--name-only", parent).split()
    assert sorted(names) == [".in-progress.yaml", "run/run-log.jsonl", "run/summary.md"]
