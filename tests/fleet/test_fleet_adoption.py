"""A supervisor's death never kills its runs: real SIGKILLs of the supervisor process alone.
Its children write their output to files, not to pipes it holds, so they finish their runs; the
next supervisor adopts every live one (``ticket_adopted``), and reads the outcome of each when
it ends — or, for one that ended while no supervisor lived, from what it left."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

from cairn.fleet.watch import Attempt
from cairn.state.layout import discover
from cairn.util.procs import pid_alive
from fleet.fleet_setup import (
    agent_env,
    agent_log,
    branch_holds_work,
    finish,
    fleet_repo,
    never_redone,
    read_until,
    record,
    started,
    supervisor,
    wait_for,
)
from helpers import dead_pid, git


def journal_events(repo: Path, ticket: str) -> list[dict[str, Any]]:
    runs = sorted((repo / ".git/cairn/tickets" / ticket).glob("*/run-log.jsonl"))
    return [json.loads(line) for run in runs for line in run.read_text().splitlines()]


def test_runs_outlive_a_killed_supervisor_and_the_next_one_adopts_them(tmp_path: Path) -> None:
    plans = {"s1": 3, "s2": 3}
    repo = fleet_repo(tmp_path, plans, max_turns=10)
    env = agent_env(tmp_path, slow="s1,s2", pause="1")
    first = supervisor(repo, env, "--once")
    pids = started(read_until(first, lambda seen: len(started(seen)) == 2))
    wait_for(lambda: all(agent_log(env, t) for t in plans), what="both agents at work")

    first.kill()  # SIGKILL, the supervisor alone
    first.wait()
    assert all(pid_alive(pid) for pid in pids.values())
    for ticket in plans:
        assert record(repo, ticket)["state"] == "running"

    code, lines = finish(supervisor(repo, env, "--once"), timeout=180)
    assert code == 0, lines
    adopted = {e["ticket"]: e["pid"] for e in lines if e["event"] == "ticket_adopted"}
    assert adopted == pids
    assert not [e for e in lines if e["event"] == "ticket_started"]  # nothing started again
    for ticket, tasks in plans.items():
        saved = record(repo, ticket)
        assert (saved["state"], saved["attempt"], saved["last_exit"]) == ("completed", 1, 0)
        # one run, never interrupted: the agent's session went on as if nothing happened
        events = [e["event"] for e in journal_events(repo, ticket)]
        assert events.count("run_started") == 1
        assert "run_interrupted" not in events and "cutoff" not in events
        assert events[-1] == "run_finished"
        never_redone(env, ticket)
        branch_holds_work(repo, ticket, tasks)


def test_runs_that_end_while_no_supervisor_lives_are_recorded_by_the_next(
    tmp_path: Path,
) -> None:
    """The supervisor is frozen while its three runs end (completed, cut at the turn cap,
    refused), then SIGKILLed: nobody read how they ended but their files."""
    plans = {"a-ok": 2, "b-cap": 5, "c-bad": 1}
    repo = fleet_repo(tmp_path, plans, max_turns=3)
    body = "".join(f"- [ ] Step {n}: {'x' * 200}\n" for n in range(6000))  # over the size limit
    (repo / "cairn-queue" / "c-bad.md").write_text(f"# Plan: c-bad\n\n{body}")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a plan cairn refuses")
    env = agent_env(tmp_path)
    first = supervisor(repo, env, "--once", "--concurrency", "3")
    pids = started(read_until(first, lambda seen: "c-bad" in started(seen)))
    os.kill(first.pid, signal.SIGSTOP)  # it reads nothing more
    wait_for(lambda: not any(pid_alive(p) for p in pids.values()), what="the runs to end")
    first.kill()
    first.wait()

    code, lines = finish(supervisor(repo, env, "--once"), timeout=180)
    assert code == 1, lines  # c-bad failed
    assert {e["ticket"] for e in lines if e["event"] == "ticket_adopted"} == set(plans)
    ok, cap, bad = (record(repo, t) for t in plans)
    assert (ok["state"], ok["attempt"], ok["last_exit"]) == ("completed", 1, 0)
    assert (bad["state"], bad["attempt"], bad["last_exit"]) == ("failed", 1, 2)
    assert "split the plan into smaller ones" in bad["detail"]
    # cut at its turn cap while nobody watched: a counted attempt, then resumed to the end
    retried = [e for e in lines if e["event"] == "ticket_retrying"]
    assert [(e["ticket"], e["reason"], e["attempt"]) for e in retried] == [
        ("b-cap", "max_turns", 1)
    ]
    assert (cap["state"], cap["attempt"], cap["last_exit"]) == ("completed", 2, 0)
    assert [e["command"] for e in lines if e["event"] == "ticket_started"] == ["resume"]
    never_redone(env, "b-cap")
    branch_holds_work(repo, "b-cap", 5)


def test_a_child_its_supervisor_never_released_starts_nothing(repo: Path) -> None:
    """The gate: a child is spawned, and its supervisor dies before the child's pid is in the
    ticket's record: the child ends at once, and no run of the ticket exists."""
    plan = repo / "plan.md"
    plan.write_text("# Plan\n\n- [ ] Step 1: one\n")
    _, _, layout = discover(repo)
    woke = threading.Event()
    child = Attempt("G-1", layout, ["run", str(plan), "--ticket", "G-1", "--json"], repo, woke)
    assert child.proc.stdin is not None
    child.proc.stdin.close()  # what a SIGKILLed supervisor's death does to the gate's pipe
    assert woke.wait(30)
    assert child.poll() and child.exit_code != 0
    assert not (repo / ".git/cairn/tickets/G-1").exists()
    assert child.out_path.read_bytes() == b""


def test_a_first_run_killed_before_its_marker_is_started_anew(tmp_path: Path) -> None:
    """What a kill of supervisor and run leaves when the run had only begun its state (its run
    directory and first journal line, no plan artifact, no marker): nothing to resume, so the
    ticket runs anew instead of failing for good."""
    repo = fleet_repo(tmp_path, {"b-1": 2})
    _, _, layout = discover(repo)
    run_dir = layout.ticket_dir("b-1") / "20261202-080000Z"
    run_dir.mkdir(parents=True)
    line = {"t": "2026-12-02T08:00:00+00:00", "event": "run_started", "ticket": "b-1"}
    (run_dir / "run-log.jsonl").write_text(json.dumps(line) + "\n")
    put = {
        "ticket": "b-1",
        "plan": "cairn-queue/b-1.md",
        "state": "running",
        "attempt": 1,
        "pid": dead_pid(),
        "updated": "2026-12-02T08:00:00+00:00",
    }
    (layout.root / "fleet" / "tickets").mkdir(parents=True)
    (layout.root / "fleet" / "tickets" / "b-1.json").write_text(json.dumps(put))
    env = agent_env(tmp_path)

    code, lines = finish(supervisor(repo, env, "--once"), timeout=120)

    assert code == 0, lines
    assert [e["command"] for e in lines if e["event"] == "ticket_started"] == ["run"]
    assert (record(repo, "b-1")["state"], record(repo, "b-1")["attempt"]) == ("completed", 1)
    branch_holds_work(repo, "b-1", 2)
