"""Workspace hooks: run in the worktree, with a timeout that kills the hook's whole group."""

from __future__ import annotations

import time
from pathlib import Path

from cairn import config as config_module
from cairn.config.records import Config
from cairn.fleet import hooks, workspaces
from cairn.git import Repo
from cairn.util.procs import pid_alive
from helpers import write


def configured(repo: Path, hooks_table: str) -> Config:
    write(repo, "cairn.toml", f"[fleet.hooks]\n{hooks_table}")
    return config_module.load(repo)


def test_a_hook_runs_in_the_worktree_with_the_ticket(repo: Path, tmp_path: Path) -> None:
    cfg = configured(repo, 'before_run = "pwd; echo ticket=$CAIRN_TICKET hook=$CAIRN_HOOK >&2"\n')
    where = tmp_path / "wt"
    where.mkdir()
    result = hooks.run_hook("before_run", where, cfg, ticket="T-1")
    assert (result.ok, result.timed_out, result.ran, result.returncode) == (True, False, True, 0)
    assert result.output.splitlines() == [str(where), "ticket=T-1 hook=before_run"]


def test_a_hook_not_configured_is_ok_and_does_not_run(repo: Path) -> None:
    result = hooks.run_hook("after_run", repo, config_module.load(repo))
    assert (result.ok, result.ran, result.output) == (True, False, "")


def test_a_failing_hook_reports_its_exit_and_output(repo: Path) -> None:
    cfg = configured(repo, 'after_create = "echo installing; echo no network >&2; exit 4"\n')
    result = hooks.run_hook("after_create", repo, cfg)
    assert (result.ok, result.timed_out, result.returncode) == (False, False, 4)
    assert result.output == "installing\nno network\n"
    assert result.describe("after_create") == "hook after_create exited 4: no network"


def test_a_hook_that_times_out_is_killed_with_its_children(repo: Path) -> None:
    cfg = configured(
        repo, 'after_run = "sleep 300 & echo $! > child.pid; echo started; wait"\ntimeout = "1s"\n'
    )
    started = time.monotonic()
    result = hooks.run_hook("after_run", repo, cfg)
    assert time.monotonic() - started < 10
    assert (result.ok, result.timed_out, result.returncode) == (False, True, None)
    assert result.output == "started\n"
    assert result.describe("after_run", "1s") == "hook after_run timed out after 1s: started"
    child = int((repo / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child)


def test_after_create_runs_once_per_worktree_until_it_succeeds(repo: Path) -> None:
    cfg = configured(repo, 'after_create = "echo run >> ../setup.log; test -f ../ok"\n')
    found = Repo.discover(repo)
    ws = workspaces.ensure(found, cfg, "T-1")
    log = ws.path.parent / "setup.log"
    assert not hooks.set_up(ws.path, ws.created, cfg, "T-1").ok  # failing: the ticket fails
    again = workspaces.ensure(found, cfg, "T-1")
    (ws.path.parent / "ok").write_text("")
    assert hooks.set_up(again.path, again.created, cfg, "T-1").ok  # not done yet: runs again
    skipped = hooks.set_up(again.path, again.created, cfg, "T-1")
    assert skipped.ok and not skipped.ran  # done: a reused worktree skips it
    assert log.read_text() == "run\nrun\n"
