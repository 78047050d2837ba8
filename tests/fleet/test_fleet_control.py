"""``cairn fleet pause|resume|stop TICKET…`` on the embedded engine (issue 22, item 13): real
supervisors, worktrees and the fleet's command agent (tests/fleet/fleet_agent.py), whose gated
tickets wait in each turn until the test opens their gate."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cairn.config.records import Config
from cairn.fleet import control
from cairn.fleet.fleetstate import FleetTicket
from cairn.terms import FLEET_STATES, FleetAction
from fleet.fleet_setup import (
    agent_env,
    agent_log,
    branch_holds_work,
    finish,
    fleet_repo,
    never_redone,
    record,
    supervisor,
    wait_for,
    wait_line,
)
from helpers import assert_one_line_error, cairn, git


def events(result: Any) -> list[dict[str, Any]]:
    assert result.returncode == 0, (result.stdout, result.stderr)
    return [json.loads(line) for line in result.stdout.splitlines()]


def open_gate(env: dict[str, str], ticket: str) -> None:
    (Path(env["FLEET_AGENT_DIR"]) / f"{ticket}.go").write_text("go\n")


def requests_left(repo: Path) -> list[str]:
    folder = repo / ".git/cairn/fleet/requests"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def working(env: dict[str, str], ticket: str) -> bool:
    return any(e["event"] == "start" for e in agent_log(env, ticket))


# --- the rule (no processes) --------------------------------------------------------------------


def _record(state: str, attempt: int = 1, reason: str | None = "max_turns") -> FleetTicket:
    return msgspec.convert(
        {
            "ticket": "T-1",
            "plan": "cairn-queue/T-1.md",
            "state": state,
            "attempt": attempt,
            "last_reason": reason,
            "updated": datetime.now().astimezone(),
        },
        FleetTicket,
    )


EXPECTED: dict[str, dict[str, str | None]] = {
    # state: what pause, resume, stop make of it (None: unchanged; "refused": exit 2)
    "queued": {"pause": "paused", "resume": None, "stop": "stopped"},
    "running": {"pause": "paused", "resume": None, "stop": "stopped"},
    "retrying": {"pause": "paused", "resume": None, "stop": "stopped"},
    "waiting": {"pause": "paused", "resume": None, "stop": "stopped"},
    "budget": {"pause": "paused", "resume": "refused", "stop": "stopped"},
    "paused": {"pause": None, "resume": "retrying", "stop": "stopped"},
    "interrupted": {"pause": "refused", "resume": "refused", "stop": "refused"},  # attempts spent
    "stopped": {"pause": "paused", "resume": "refused", "stop": None},
    "needs_review": {"pause": "refused", "resume": "refused", "stop": "refused"},
    "needs_input": {"pause": "refused", "resume": "refused", "stop": "refused"},
    "completed": {"pause": "refused", "resume": "refused", "stop": "refused"},
    "approved": {"pause": "refused", "resume": "refused", "stop": "refused"},
    "failed": {"pause": "refused", "resume": "refused", "stop": "refused"},
}


@pytest.mark.parametrize("state", FLEET_STATES)
@pytest.mark.parametrize("action", ["pause", "resume", "stop"])
def test_what_each_action_does_in_each_state(state: str, action: FleetAction) -> None:
    config = msgspec.convert({"fleet": {"max_attempts": 3}}, Config)
    decision = control.decide(action, _record(state, attempt=3), config, supervised=True)
    wanted = EXPECTED[state][action]
    if wanted == "refused":
        assert decision.refusal is not None and "; " in decision.refusal
        assert decision.state is None
    else:
        assert (decision.state, decision.refusal) == (wanted, None)


def test_a_ticket_interrupted_by_a_fleet_stop_can_be_paused_and_a_new_one_resumes_queued() -> None:
    config = msgspec.convert({}, Config)
    stopped = _record("interrupted", attempt=0, reason="signal")
    assert control.decide("pause", stopped, config, supervised=False).state == "paused"
    fresh = _record("paused", attempt=0, reason=None)
    assert control.decide("resume", fresh, config, supervised=False).state == "queued"


# --- with a supervisor --------------------------------------------------------------------------


@pytest.mark.slow
def test_pause_cuts_a_running_ticket_off_and_resume_continues_it(tmp_path: Path) -> None:
    plans = {"p1": 3, "p2": 2}
    repo = fleet_repo(tmp_path, plans, max_turns=10)
    env = agent_env(tmp_path, gate="p1")
    proc = supervisor(repo, env)
    wait_for(lambda: working(env, "p1"), what="p1 working")
    worktree = Path(record(repo, "p1")["worktree"])
    (worktree / "scratch.txt").write_text("p1 scratch\n")  # uncommitted: the pause must save it

    (paused,) = events(cairn("fleet", "pause", "p1", "--json", cwd=repo, env=env))

    assert (paused["event"], paused["state"]) == ("ticket_pause", "paused"), paused
    saved = record(repo, "p1")
    assert (saved["state"], saved["attempt"], saved["pid"]) == ("paused", 0, None), saved
    assert "cairn fleet resume p1" in saved["detail"]
    assert paused["snapshot"] and git(repo, "show", "refs/cairn/wip/p1:scratch.txt") == (
        "p1 scratch\n"
    )
    assert requests_left(repo) == []
    # the rest of the fleet goes on; the paused ticket is not started again
    wait_for(lambda: record(repo, "p2")["state"] == "completed", what="p2 completed")
    (again,) = events(cairn("fleet", "pause", "p1", "--json", cwd=repo, env=env))
    assert (again["event"], again["state"]) == ("ticket_unchanged", "paused")

    open_gate(env, "p1")
    (resumed,) = events(cairn("fleet", "resume", "p1", "--json", cwd=repo, env=env))
    assert resumed["event"] == "ticket_resume" and resumed["state"] in ("retrying", "running")
    wait_for(lambda: record(repo, "p1")["state"] == "completed", what="p1 completed")
    assert cairn("fleet", "stop", cwd=repo, env=env).returncode == 0
    _, lines = finish(proc, timeout=60)
    starts = [e for e in lines if e["event"] == "ticket_started" and e["ticket"] == "p1"]
    assert [(e["attempt"], e["command"]) for e in starts] == [(1, "run"), (1, "resume")]
    kinds = [e["event"] for e in lines if e.get("ticket") == "p1"]
    assert kinds.index("ticket_pause") < kinds.index("ticket_resume")
    between = kinds[kinds.index("ticket_pause") : kinds.index("ticket_resume")]
    assert "ticket_started" not in between  # not restarted until resumed
    never_redone(env, "p1")
    branch_holds_work(repo, "p1", 3)


@pytest.mark.slow
def test_stop_ends_a_ticket_stopped_and_the_next_start_starts_it_again(tmp_path: Path) -> None:
    plans = {"s1": 2, "s2": 1}
    repo = fleet_repo(tmp_path, plans, max_turns=10)
    env = agent_env(tmp_path, gate="s1")
    proc = supervisor(repo, env, "--once")
    wait_for(lambda: working(env, "s1"), what="s1 working")
    (Path(record(repo, "s1")["worktree"]) / "scratch.txt").write_text("s1 scratch\n")

    result = cairn("fleet", "stop", "s1", cwd=repo, env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("s1: stopped, snapshot "), result.stdout
    assert "the next cairn fleet start starts it again" in result.stdout
    code, lines = finish(proc, timeout=60)
    assert code == 3, lines  # left resumable
    assert lines[-1]["tickets"] == {"s1": "stopped", "s2": "completed"}
    saved = record(repo, "s1")
    assert (saved["state"], saved["attempt"]) == ("stopped", 0), saved
    assert git(repo, "show", "refs/cairn/wip/s1:scratch.txt") == "s1 scratch\n"
    refused = cairn("fleet", "resume", "s1", cwd=repo, env=env)
    assert_one_line_error(refused)
    assert "cairn fleet start starts it again" in refused.stderr
    assert record(repo, "s1") == saved

    open_gate(env, "s1")
    code, lines = finish(supervisor(repo, env, "--once"), timeout=120)
    assert code == 0, lines
    assert [e["ticket"] for e in lines if e["event"] == "ticket_restarted"] == ["s1"]
    assert record(repo, "s1")["state"] == "completed"
    never_redone(env, "s1")
    branch_holds_work(repo, "s1", 2)


# --- without a supervisor -----------------------------------------------------------------------


def queued_fleet(tmp_path: Path, plans: dict[str, int]) -> tuple[Path, dict[str, str]]:
    """A fleet whose tickets have records, all queued, and no supervisor running."""
    repo = fleet_repo(tmp_path, plans, min_free_memory="1000TiB")
    env = agent_env(tmp_path)
    proc = supervisor(repo, env)
    wait_line(proc, "waiting")
    assert cairn("fleet", "stop", cwd=repo, env=env).returncode == 0
    finish(proc, timeout=30)
    config = (repo / "cairn.toml").read_text().replace('"1000TiB"', '"1MiB"')
    (repo / "cairn.toml").write_text(config)
    git(repo, "commit", "-qam", "memory")
    return repo, env


def test_without_a_supervisor_the_records_change_at_once(tmp_path: Path) -> None:
    repo, env = queued_fleet(tmp_path, {"n1": 1, "n2": 1})

    (unchanged,) = events(cairn("fleet", "resume", "n2", "--json", cwd=repo, env=env))
    (paused,) = events(cairn("fleet", "pause", "n1", "--json", cwd=repo, env=env))

    assert (unchanged["event"], unchanged["state"]) == ("ticket_unchanged", "queued")
    assert (paused["event"], paused["state"]) == ("ticket_pause", "paused")
    assert record(repo, "n1")["state"] == "paused"
    assert requests_left(repo) == []
    code, lines = finish(supervisor(repo, env, "--once"), timeout=120)
    assert code == 3, lines  # a ticket is left paused
    assert lines[-1]["tickets"] == {"n1": "paused", "n2": "completed"}
    assert not agent_log(env, "n1")

    resumed = cairn("fleet", "resume", "n1", cwd=repo, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "n1: resumed (queued); the next cairn fleet start runs it"
    code, lines = finish(supervisor(repo, env, "--once"), timeout=120)
    assert code == 0, lines
    assert record(repo, "n1")["state"] == "completed"


def test_unknown_tickets_and_actions_that_do_not_apply_exit_2_and_change_nothing(
    tmp_path: Path,
) -> None:
    repo, env = queued_fleet(tmp_path, {"e1": 1, "e2": 1})
    code, _ = finish(supervisor(repo, env, "--once"), timeout=120)
    assert code == 0
    before = (record(repo, "e1"), record(repo, "e2"))
    for args, words in [
        (["pause", "nope"], "no fleet ticket nope; the fleet's tickets are e1, e2"),
        (["stop", "e1", "nope", "zap"], "no fleet tickets nope, zap"),
        (["pause", "e1"], "ticket e1 is completed, so there is nothing to pause"),
        (["resume", "e2"], "ticket e2 is completed"),
        (["stop", "e1"], "ticket e1 is completed"),
        (["pause", "bad id!"], "bad id!"),
    ]:
        result = cairn("fleet", *args, cwd=repo, env=env)
        assert_one_line_error(result)
        assert words in result.stderr, (args, result.stderr)
    assert (record(repo, "e1"), record(repo, "e2")) == before
    assert requests_left(repo) == []


# --- from the dashboard's API, through a running supervisor ----------------------------------


@pytest.mark.slow
def test_the_api_pauses_and_resumes_through_a_running_supervisor(tmp_path: Path) -> None:
    """``cairn fleet start --port``: a POST without an Origin (another program's) is carried out
    by the supervisor within a tick, as ``cairn fleet pause`` is, and journalled as the API's."""
    import httpx2

    from fleet.dashboard_setup import serve, started_url

    repo = fleet_repo(tmp_path, {"a1": 2}, max_turns=10)
    env = agent_env(tmp_path, gate="a1")
    proc = serve(["start", "--port", "0", "--json"], repo, env)
    try:
        url = started_url(proc).rstrip("/")
        wait_for(lambda: working(env, "a1"), what="a1 working")
        asked = httpx2.post(f"{url}/api/v1/tickets/a1/pause", timeout=30)
        assert asked.status_code == 202, asked.text
        body = asked.json()
        assert (body["ticket"], body["action"], body["by"], body["changed"]) == (
            "a1",
            "pause",
            "api",
            True,
        )
        wait_for(lambda: record(repo, "a1")["state"] == "paused", what="a1 paused")
        # the supervisor writes the record, then takes the request away: a moment apart
        wait_for(lambda: requests_left(repo) == [], what="the pause request carried out")
        refused = httpx2.post(f"{url}/api/v1/tickets/a1/retry", timeout=30)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "not_applicable"
        open_gate(env, "a1")
        resumed = httpx2.post(f"{url}/api/v1/tickets/a1/resume", timeout=30)
        assert resumed.status_code == 202, resumed.text
        wait_for(lambda: record(repo, "a1")["state"] == "completed", what="a1 completed")
        page = httpx2.get(f"{url}/api/v1/tickets/a1", timeout=30).json()
        asks = [(e["action"], e["by"]) for e in page["journal"] if e["event"] == "asked"]
        assert asks == [("pause", "api"), ("resume", "api")]
    finally:
        cairn("fleet", "stop", cwd=repo, env=env)
        _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    never_redone(env, "a1")
    branch_holds_work(repo, "a1", 2)
