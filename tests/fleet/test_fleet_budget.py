"""``[fleet] max_cost_usd``: the fleet's total spend is capped (issue 22, item 2, its fleet half).
Real supervisors, worktrees and cairn's scripted agent, whose turns report what they cost."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.testclient import TestClient

from cairn.fleet import budget
from cairn.fleet.dashboard.app import make_app
from fleet.fleet_setup import (
    agent_env,
    finish,
    fleet_repo,
    record,
    scripted_fleet,
    summary_of,
    supervisor,
)
from helpers import cairn, git


def test_a_spent_fleet_budget_stops_running_runs_after_their_turn_and_holds_the_rest(
    tmp_path: Path,
) -> None:
    repo = scripted_fleet(tmp_path, {"b1": 1, "b2": 3, "b3": 1}, concurrency=2, max_cost_usd=0.25)

    code, lines = finish(supervisor(repo, {}, "--once"), timeout=180)

    assert code == 3, lines  # tickets are left waiting, resumable
    said = {e["event"]: e for e in lines}
    assert said["fleet_budget"] == {
        "event": "fleet_budget",
        "max_cost_usd": 0.25,
        "spent_usd": 0,
        "unknown": 0,
    }
    assert "fleet.max_cost_usd" in said["waiting"]["message"]
    assert lines[-1]["tickets"] == {"b1": "completed", "b2": "budget", "b3": "budget"}
    # b2 was running when b1's $0.30 passed the cap: it finished the turn it was in and
    # stopped, resumable, its attempt not counted; b3 never started
    cut = record(repo, "b2")
    assert (cut["state"], cut["attempt"], cut["last_reason"]) == ("budget", 0, "budget"), cut
    assert cut["detail"].startswith("waiting: the fleet has spent $0.")
    assert "its budget fleet.max_cost_usd is $0.25" in cut["detail"]
    text = summary_of(repo, "b2")
    assert "Interrupted — budget" in text and "fleet.max_cost_usd" in text
    assert "### Task 1: Step 1 — completed" in text
    assert "### Task 3: Step 3 — completed" not in text
    assert record(repo, "b3")["attempt"] == 0
    assert not (repo / ".git/cairn/tickets/b3").exists()
    # `fleet status` and the dashboard show them waiting for the budget
    rows = json.loads(cairn("fleet", "status", "--json", cwd=repo).stdout)
    assert {r["ticket"]: r["state"] for r in rows} == lines[-1]["tickets"]
    with TestClient(make_app(repo, token=None), base_url="http://127.0.0.1") as client:
        state = client.get("/api/v1/state").json()
    assert state["counts"]["budget"] == 2 and state["counts"]["completed"] == 1

    # a person raises the cap: the next start lets them run, b2 resumed where it stopped
    config = (repo / "cairn.toml").read_text().replace("max_cost_usd = 0.25", "max_cost_usd = 5")
    (repo / "cairn.toml").write_text(config)
    git(repo, "commit", "-qam", "a larger fleet budget")
    code, lines = finish(supervisor(repo, {}, "--once"), timeout=180)
    assert code == 0, lines
    (start,) = [e for e in lines if e["event"] == "fleet_budget"]
    assert start["max_cost_usd"] == 5 and start["spent_usd"] >= 0.6 and start["unknown"] == 0
    assert [e["command"] for e in lines if e.get("ticket") == "b2" and "command" in e] == ["resume"]
    for ticket in ("b1", "b2", "b3"):
        assert record(repo, ticket)["state"] == "completed"
    assert "### Task 3: Step 3 — completed" in summary_of(repo, "b2")


def test_the_budget_line_says_the_cap_or_no_limit_and_unknown_costs() -> None:
    assert (
        budget.line({"max_cost_usd": 50.0, "spent_usd": 12.3, "unknown": 0})
        == "fleet budget: $50.00 ($12.30 spent so far)"
    )
    assert (
        budget.line({"max_cost_usd": 10, "spent_usd": 2.5, "unknown": 2})
        == "fleet budget: $10.00 ($2.50 spent so far (the cost of 2 tickets is unknown))"
    )
    assert budget.line({"max_cost_usd": None, "spent_usd": None, "unknown": None}) == (
        "no fleet cost limit"
    )


def test_an_agent_that_reports_no_cost_is_counted_as_unknown_and_said_so(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"u1": 1}, max_cost_usd=5)  # the command agent: no usage
    env = agent_env(tmp_path)
    code, _ = finish(supervisor(repo, env, "--once"), timeout=60)
    assert code == 0
    result = cairn("fleet", "start", "--once", cwd=repo, env=env)
    assert result.returncode == 0, result.stderr
    assert "fleet budget: $5.00 ($0.00 spent so far (the cost of 1 ticket is unknown))" in (
        result.stdout
    )
