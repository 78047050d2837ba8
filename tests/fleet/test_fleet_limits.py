"""The fleet and the agents' usage limits, with the scripted agent as a real subprocess under a
real supervisor: tickets whose run hits a limit move to the fallback agent; without one they wait
(``waiting``, not an attempt) for the reset, and the supervisor starts no ticket while every
agent is at a limit. Plus the schedule's rules for it."""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from cairn.config.records import Config, FleetConfig
from cairn.fleet import notify, schedule
from cairn.fleet.facts import Facts
from cairn.fleet.fleetstate import FleetTicket
from cairn.state import journal, limited
from cairn.state.layout import Layout
from fleet.fleet_setup import FLEET_DEFAULTS, finish, read_until, record, supervisor
from helpers import assert_one_line_error, cairn, git, make_repo

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
TICKETS = ("t1", "t2", "t3")


def barrier(directory: Path) -> dict[str, str]:
    """A ``run`` action: this ticket is in its dispatch; on until t1 and t2 both are (so both
    dispatch on the primary before either meets its limit), 20 s at most."""
    here = f'touch "{directory}/$CAIRN_TICKET.in"'
    wait = f'[ -f "{directory}/t1.in" ] && [ -f "{directory}/t2.in" ] && break'
    return {"run": f"{here}; for i in $(seq 400); do {wait}; sleep 0.05; done"}


def task(n: int) -> list[dict[str, Any]]:
    return [
        {"write": {"path": f"task-{n}.txt", "content": f"task {n}\n"}},
        {"cairn": ["task", "done", str(n), "--files", f"task-{n}.txt"]},
    ]


def task_one_unless_done() -> dict[str, str]:
    """A ``run`` action: task 1, unless its file is in the work tree (the primary did it)."""
    done = f"{sys.executable} -m cairn task done 1 --files task-1.txt"
    return {"run": f"[ -f task-1.txt ] || {{ echo 'task 1' > task-1.txt && {done}; }}"}


def limit(resets: float) -> dict[str, str]:
    """A ``fail`` action: Claude's usage limit, resetting at epoch seconds ``resets``."""
    return {"fail": f"Claude AI usage limit reached|{int(resets)}"}


def project(tmp_path: Path, primary: dict[str, Any], backup: dict[str, Any] | None = None) -> Path:
    """A repository whose fleet (concurrency 2) runs t1, t2, t3 (two tasks each) on the
    scripted agent ``primary``, with ``backup`` as its fallback ``[agents.backup]``."""
    scripts = {"primary": primary, **({"backup": backup} if backup else {})}
    for name, script in scripts.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(script))
    config = (
        f'[agent]\nkind = "scripted"\nscript = "{tmp_path / "primary.json"}"\nmax_turns = 5\n'
        "budget_pressure_turns = 1\nmax_continuations = 2\ncutoff_timeout_ms = 3000\n"
        + ('fallback = ["backup"]\n\n[agents.backup]\nkind = "scripted"\n' if backup else "")
        + (f'script = "{tmp_path / "backup.json"}"\n' if backup else "")
        + '\n[loop]\nphases = ["implement"]\n\n[fleet]\n'
        + "".join(
            f"{k} = {json.dumps(v)}\n" for k, v in {**FLEET_DEFAULTS, "concurrency": 2}.items()
        )
    )
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n", "cairn.toml": config})
    for ticket in TICKETS:
        body = "".join(f"### Task {n}: Step {n}\n\nDo step {n}.\n\n" for n in (1, 2))
        queued = repo / "cairn-queue" / f"{ticket}.md"
        queued.parent.mkdir(exist_ok=True)
        queued.write_text(f"# Plan: {ticket}\n\n{body}")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the queue")
    return repo


def layout(repo: Path) -> Layout:
    return Layout(repo / ".git" / "cairn")


def events(repo: Path, ticket: str, name: str) -> list[dict[str, Any]]:
    at = layout(repo)
    run = at.latest_run(ticket)
    assert run is not None, ticket
    found, _ = journal.read(at.run_dir(ticket, run))
    return [e for e in found if e["event"] == name]


def timed(proc: Any, done: Any) -> list[tuple[float, dict[str, Any]]]:
    """The supervisor's JSON lines up to the one ``done`` accepts, each with when it came."""
    seen: list[tuple[float, dict[str, Any]]] = []

    def note(lines: list[dict[str, Any]]) -> bool:
        seen.append((time.time(), lines[-1]))
        return bool(done(seen))

    read_until(proc, note)
    return seen


def never_redone(repo: Path, ticket: str) -> None:
    completed = [e["task"] for e in events(repo, ticket, "task") if e["status"] == "completed"]
    assert sorted(completed) == [1, 2], (ticket, completed)


def test_tickets_move_to_the_fallback_and_later_ones_start_on_it(tmp_path: Path) -> None:
    primary = {"coder": [[barrier(tmp_path), *task(1), limit(time.time() + 3600)]]}
    backup = {"coder": [[task_one_unless_done(), *task(2)]]}
    repo = project(tmp_path, primary, backup)

    code, lines = finish(supervisor(repo, {}, "--once"))

    assert code == 0, lines
    assert not [e for e in lines if e["event"] == "ticket_waiting"], lines
    for ticket in TICKETS:
        assert record(repo, ticket)["state"] == "completed"
        assert record(repo, ticket)["attempt"] == 1  # no attempt for the limit
        never_redone(repo, ticket)
    for ticket in ("t1", "t2"):  # both met the limit and moved on within their run
        finished = events(repo, ticket, "dispatch_finished")
        assert [(e["agent"], e.get("failure")) for e in finished] == [
            ("scripted", "usage_limit"),
            ("backup", None),
        ]
        (switched,) = events(repo, ticket, "agent_switched")
        assert (switched["from"], switched["to"]) == ("scripted", "backup")
    # t3 started after: its run never dispatched on the limited agent
    assert {e["agent"] for e in events(repo, "t3", "dispatch_finished")} == {"backup"}
    held = limited.holding(layout(repo), "scripted", datetime.now(UTC))
    assert held is not None and held.reset_known


def test_without_a_fallback_tickets_wait_for_the_reset_then_complete(tmp_path: Path) -> None:
    resets = time.time() + 8
    primary = {"coder": [[barrier(tmp_path), *task(1), limit(resets)], task(2)]}
    repo = project(tmp_path, primary)
    proc = supervisor(repo, {}, "--once")

    def all_waiting(seen: list[tuple[float, dict[str, Any]]]) -> bool:
        return {e["ticket"] for _, e in seen if e["event"] == "ticket_waiting"} == set(TICKETS)

    seen = timed(proc, all_waiting)
    assert time.time() < resets, "the runs took longer than the test's reset"
    reset_at = datetime.fromtimestamp(int(resets), UTC)
    for ticket in TICKETS:
        now = record(repo, ticket)
        assert now["state"] == "waiting"
        assert datetime.fromisoformat(now["next_attempt_at"]) == reset_at
        assert now["attempt"] == 0  # t1 and t2: their limited attempt is not counted
    for ticket in ("t1", "t2"):  # the run's error line: the limit, the agent, the reset
        detail = record(repo, ticket)["detail"]
        assert detail.startswith("usage limit of scripted; resets "), detail
    assert record(repo, "t3")["detail"].startswith(
        "waiting: every agent is at a limit; usage limit of scripted; resets "
    )
    status = json.loads(cairn("fleet", "status", "--json", cwd=repo).stdout)
    (shown,) = [row for row in status if row["ticket"] == "t3"]
    assert [(h["agent"], h["limit"]) for h in shown["held"]] == [("scripted", "usage_limit")]
    text = cairn("fleet", "status", cwd=repo).stdout
    assert "agents at a limit now" in text and "scripted: usage limit, resets " in text

    later = timed(proc, lambda s: s[-1][1]["event"] == "fleet_finished")
    code, _ = finish(proc)
    assert code == 0, later
    starts = [(at, e["ticket"]) for at, e in seen + later if e["event"] == "ticket_started"]
    assert [t for _, t in starts[:2]] in (["t1", "t2"], ["t2", "t1"])
    assert all(at >= int(resets) for at, _ in starts[2:]), (starts, resets)  # none before it
    assert sorted(t for _, t in starts[2:]) == list(TICKETS)  # then each started again
    for ticket in TICKETS:
        assert record(repo, ticket)["state"] == "completed"
        assert record(repo, ticket)["attempt"] == 1  # the wait used no attempt
        never_redone(repo, ticket)


def test_a_ticket_waiting_on_a_far_reset_is_paused_stopped_not_retried(tmp_path: Path) -> None:
    primary = {"coder": [[barrier(tmp_path), *task(1), limit(time.time() + 3600)]]}
    repo = project(tmp_path, primary)
    proc = supervisor(repo, {})
    try:
        seen = timed(proc, lambda s: sum(e["event"] == "ticket_waiting" for _, e in s) == 3)
        retried = cairn("fleet", "retry", "t1", cwd=repo)
        assert_one_line_error(retried)
        assert "waits for its agents' limit to reset" in retried.stderr
        assert cairn("fleet", "pause", "t3", cwd=repo).returncode == 0
        assert record(repo, "t3")["state"] == "paused"
        assert record(repo, "t1")["state"] == "waiting"
        assert [e["ticket"] for _, e in seen if e["event"] == "ticket_started"] == ["t1", "t2"]
    finally:
        assert cairn("fleet", "stop", cwd=repo).returncode == 0
    code, _ = finish(proc)
    assert code == 3  # left waiting: resumable
    assert record(repo, "t2")["state"] == "waiting"


def test_fleet_start_refuses_a_fallback_that_names_no_agent(tmp_path: Path) -> None:
    repo = project(tmp_path, {"coder": [task(1)]})
    toml = (repo / "cairn.toml").read_text().replace("[agent]\n", '[agent]\nfallback = ["nope"]\n')
    (repo / "cairn.toml").write_text(toml)
    git(repo, "commit", "-qam", "a fallback")
    started = cairn("fleet", "start", "--once", cwd=repo)
    assert_one_line_error(started)
    assert "agent.fallback: 'nope' is not an agent" in started.stderr
    assert not (repo / ".git" / "cairn" / "fleet").exists()


# --- the schedule's rules ------------------------------------------------------------------------


def held(agent: str, minutes: float, known: bool = True) -> limited.Held:
    return limited.Held(
        agent=agent,
        kind="claude-code",
        limit="usage_limit",
        resets_at=NOW + timedelta(minutes=minutes),
        reset_known=known,
        seen_at=NOW,
    )


def ticket(state: Any, attempt: int = 1, **fields: Any) -> FleetTicket:
    return FleetTicket(
        ticket="T-1", plan="q/T-1.md", state=state, attempt=attempt, updated=NOW, **fields
    )


def test_an_attempt_that_stopped_on_a_limit_waits_for_the_reset_and_is_not_counted() -> None:
    config = FleetConfig(max_attempts=1, retry_backoff="10s")
    line = "usage limit of claude-code; resets 13:00 UTC: limit reached"
    reset = NOW + timedelta(hours=1)
    verdict = schedule.after_attempt(
        config, ticket("running"), 3, "usage_limit", line, False, NOW, reset=reset
    )
    assert verdict == schedule.Verdict("waiting", reset, line, False)
    # attempts used up: a limit still only waits
    rate = schedule.after_attempt(config, ticket("running"), 3, "rate_limit", None, False, NOW)
    assert rate == schedule.Verdict("waiting", NOW + timedelta(seconds=10), "rate_limit", False)
    # a person's pause that cut it off wins
    paused = schedule.after_attempt(
        config, ticket("running"), 3, "usage_limit", line, False, NOW, held="pause", reset=reset
    )
    assert paused.state == "paused"


def test_a_waiting_ticket_runs_at_its_reset_and_is_pending_until_then() -> None:
    config = FleetConfig()
    waiting = ticket("waiting", next_attempt_at=NOW + timedelta(minutes=5))
    assert not schedule.runnable(config, waiting, NOW)
    assert schedule.runnable(config, waiting, NOW + timedelta(minutes=5))
    assert schedule.pending(config, waiting) and schedule.ahead(config, waiting)
    assert schedule.order(waiting) == schedule.order(ticket("retrying"))
    assert schedule.order(waiting) < schedule.order(ticket("queued", attempt=0))


def test_tickets_are_held_back_only_while_every_agent_of_the_chain_is_at_a_limit() -> None:
    first, second, other = held("claude", 30), held("codex", 10), held("other", 1)
    assert schedule.blocked(["claude", "codex"], [first]) is None  # codex is free
    assert schedule.blocked(["claude", "codex"], [first, second, other]) == second
    assert schedule.blocked(["claude"], [other]) is None
    assert schedule.soonest(["claude", "codex"], [first, other]) == first
    assert schedule.soonest(["claude"], [other]) is None
    said = schedule.limit_detail(held("claude", 60), NOW)
    assert said == "waiting: every agent is at a limit; usage limit of claude; resets 13:00 UTC"
    guessed = schedule.limit_detail(held("claude", 60, known=False), NOW)
    assert guessed.endswith("(a guess: the agent did not say when)")


def test_a_waiting_ticket_is_notified_with_its_limit_and_reset() -> None:
    reset = NOW + timedelta(hours=1)
    line = "usage limit of claude-code; resets 13:00 UTC: limit reached"
    waiting = ticket("waiting", next_attempt_at=reset, detail=line)
    assert notify.wanted(waiting)
    facts = Facts("T-1", "cairn/T-1", None, None, None, None, "refs/cairn/wip/T-1", None)
    body = notify.payload(waiting, facts, Config())
    assert (body["event"], body["state"], body["detail"]) == ("ticket_waiting", "waiting", line)
    assert body["next_attempt_at"] == reset.isoformat()
    assert body["key"] == f"cairn:T-1:1:waiting:{reset.isoformat()}"  # a new reset, a new key


def test_a_resume_by_hand_that_stops_on_a_limit_leaves_the_ticket_waiting() -> None:
    from cairn.fleet.byhand import _after
    from cairn.run.orchestrator import RunOutcome

    line = "usage limit of claude-code; resets 13:00 UTC: You've hit your session limit"
    stopped = RunOutcome(
        ticket="T-1",
        run="20261203-120000Z",
        status="interrupted",
        reason="usage_limit",
        exit_code=3,
        run_dir="/x",
        error=line,
    )
    before = ticket("waiting", attempt=2, next_attempt_at=NOW)
    reset = NOW + timedelta(hours=1)
    after = _after(FleetConfig(max_attempts=2), before, stopped, reset)
    assert (after.state, after.next_attempt_at, after.detail) == ("waiting", reset, line)
    assert after.attempt == 2 and after.last_reason == "usage_limit"  # not an attempt
    # another cutoff of the same resume is an attempt, as before
    cut = RunOutcome(**{**msgspec.structs.asdict(stopped), "reason": "max_turns"})
    assert _after(FleetConfig(max_attempts=2), before, cut, None).state == "retrying"


def test_an_unreadable_limit_record_is_said_not_dropped_silently(tmp_path: Path) -> None:
    repo = project(tmp_path, {"coder": [task(1)]})
    where = limited.directory(layout(repo))
    where.mkdir(parents=True)
    (where / "scripted.json").write_text("{not json")
    shown = cairn("fleet", "status", cwd=repo)
    assert shown.returncode == 0
    assert "scripted.json could not be read" in shown.stderr and "remove it" in shown.stderr
    assert limited.all_held(layout(repo), NOW) == []  # it holds nothing
