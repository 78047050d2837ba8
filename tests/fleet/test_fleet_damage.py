"""The fleet survives its own damage: a supervisor killed inside ``git worktree add`` (really:
the checkout is held in a smudge filter, then killed), and one damaged ticket (a garbage
``.git`` file, a corrupt fleet record) among others that run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fleet.fleet_setup import (
    agent_env,
    branch_holds_work,
    finish,
    fleet_repo,
    kill_everything,
    never_redone,
    read_until,
    record,
    started,
    supervisor,
    wait_for,
)
from helpers import cairn, git


def held_checkout(tmp_path: Path, plans: dict[str, int]) -> tuple[Path, Path, Path]:
    """A fleet repository whose checkout of ``held.txt`` waits (in a smudge filter) while the
    file ``BLOCK`` exists, after touching ``REACHED``: ``git worktree add`` can be caught
    half-way, for real."""
    repo = fleet_repo(tmp_path, plans)
    block, reached = tmp_path / "BLOCK", tmp_path / "REACHED"
    (repo / "held.txt").write_text("held\n")
    (repo / ".gitattributes").write_text("held.txt filter=held\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a file whose checkout can be held")
    smudge = f"touch {reached}; while [ -e {block} ]; do sleep 0.05; done; cat"
    git(repo, "config", "filter.held.smudge", f"sh -c '{smudge}'")
    git(repo, "config", "filter.held.clean", "cat")
    block.touch()
    return repo, block, reached


def worktree_listing(repo: Path) -> str:
    return git(repo, "worktree", "list", "--porcelain")


@pytest.mark.slow
def test_a_supervisor_killed_inside_git_worktree_add_is_rebuilt_by_the_next(
    tmp_path: Path,
) -> None:
    plans = {"w1": 2, "w2": 2}
    repo, block, reached = held_checkout(tmp_path, plans)
    env = agent_env(tmp_path)
    first = supervisor(repo, env, "--once")
    wait_for(reached.exists, what="git worktree add to reach the held file")
    kill_everything(first)  # the supervisor, git, its checkout and the filter, at one instant
    half_made = tmp_path / "repo.cairn" / "w1"
    assert "locked initializing" in worktree_listing(repo)
    assert not (half_made / "held.txt").exists()
    block.unlink()

    code, lines = finish(supervisor(repo, env, "--once"), timeout=240)

    assert code == 0, lines
    warned = [e for e in lines if e["event"] == "ticket_warning"]
    assert [e["ticket"] for e in warned] == ["w1"], warned
    assert "locked 'initializing'" in warned[0]["message"]
    assert "moved it to" in warned[0]["message"]
    for ticket, tasks in plans.items():
        saved = record(repo, ticket)
        assert saved["state"] == "completed", saved
        branch_holds_work(repo, ticket, tasks)
        never_redone(env, ticket)
    assert (half_made / "held.txt").read_text() == "held\n"
    assert "locked" not in worktree_listing(repo)
    assert [p.name for p in half_made.parent.iterdir() if ".orphan-" in p.name] != []


@pytest.mark.slow
def test_git_outliving_a_killed_supervisor_finishes_the_worktree_before_the_next_uses_it(
    tmp_path: Path,
) -> None:
    """Only the supervisor is killed: its ``git worktree add`` goes on, holding the worktrees
    lock, so the next supervisor waits for a whole worktree instead of rebuilding one that
    git is still making."""
    repo, block, reached = held_checkout(tmp_path, {"w1": 2})
    env = agent_env(tmp_path)
    first = supervisor(repo, env, "--once")
    wait_for(reached.exists, what="git worktree add to reach the held file")
    first.kill()
    first.wait()
    second = supervisor(repo, env, "--once")
    lock = repo / ".git/cairn/locks/worktrees"
    wait_for(lambda: waiting_on(lock), what="the next supervisor to wait for the lock")
    assert "locked initializing" in worktree_listing(repo)  # git is still at it
    block.unlink()

    code, lines = finish(second, timeout=240)

    assert code == 0, lines
    assert not [e for e in lines if e["event"] == "ticket_warning"]
    assert not [p for p in (tmp_path / "repo.cairn").iterdir() if ".orphan-" in p.name]
    branch_holds_work(repo, "w1", 2)


def waiting_on(lock: Path) -> bool:
    """Whether a process waits for the flock on ``lock`` (a ``->`` line of /proc/locks)."""
    info = os.stat(lock)
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    with open("/proc/locks") as locks:
        return any("->" in line and line.split()[6] == device for line in locks)


@pytest.mark.slow
def test_one_damaged_ticket_stops_only_itself(tmp_path: Path) -> None:
    """A garbage ``.git`` file in one worktree, a fleet record that is not JSON for another:
    each is set right with a warning (terminal, ``--json``, its status detail), and every
    ticket runs to its end."""
    plans = {"d1": 3, "d2": 3, "d3": 3}
    repo = fleet_repo(tmp_path, plans, max_turns=10)
    env = agent_env(tmp_path, slow="d1,d2,d3", pause="1")
    env["FLEET_AGENT_PAUSE"] = "1"
    first = supervisor(repo, env, "--once")
    read_until(first, lambda seen: len(started(seen)) == 3)
    kill_everything(first)
    worktree = Path(record(repo, "d1")["worktree"])
    (worktree / ".git").write_text("garbage\n")
    (repo / ".git/cairn/fleet/tickets/d2.json").write_text('{"ticket": "d2", "sta')

    second = supervisor(repo, env, "--once")
    seen = read_until(second, lambda seen: {"d1", "d2"} <= set(started(seen)))
    warned = {e["ticket"]: e["message"] for e in seen if e["event"] == "ticket_warning"}
    assert "wrote it again" in warned["d1"]
    assert "its fleet record could not be read" in warned["d2"]
    assert "moved it to d2.json.unreadable-" in warned["d2"]
    rows = {r["ticket"]: r for r in json.loads(cairn("fleet", "status", "--json", cwd=repo).stdout)}
    for ticket in ("d1", "d2"):  # its status says it while it runs
        assert rows[ticket]["state"] == "running"
        assert warned[ticket] in (rows[ticket]["detail"] or ""), (ticket, rows[ticket], seen)
    code, lines = finish(second, timeout=240)
    assert code == 0, lines
    for ticket, tasks in plans.items():
        assert record(repo, ticket)["state"] == "completed"
        branch_holds_work(repo, ticket, tasks)
        never_redone(env, ticket)
    aside = [
        p.name for p in (repo / ".git/cairn/fleet/tickets").iterdir() if "unreadable" in p.name
    ]
    assert len(aside) == 1

    # on the terminal: one warning line on stderr; a finished ticket's record made again
    # from its run says so in its status detail for good
    (repo / ".git/cairn/fleet/tickets/d3.json").write_bytes(b"\0\1 not a record")
    done = cairn("fleet", "start", "--once", cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("cairn: warning: d3: its fleet record could not be read (")
    assert line.endswith("and made it again from its run")
    saved = record(repo, "d3")
    assert (saved["state"], saved["attempt"], saved["detail"]) == (
        "completed",
        1,
        line.removeprefix("cairn: warning: d3: "),
    )
    assert f"d3: {saved['detail']}" in cairn("fleet", "status", cwd=repo).stdout
