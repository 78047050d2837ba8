"""The fleet side of ``needs_input`` (issue 22, the contract with the no-progress stop): a run
whose outcome is ``needs_input``, or whose journal's last interruption is ``no_progress``, makes
its ticket ``needs_input``, never retried, with the blocker as its detail.

Until the no-progress stop lands, the run's end is written as it writes it
(``cairn.state.runstate.interrupt`` with reason ``no_progress``) into a real fleet run."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import msgspec

from cairn.config.records import FleetConfig
from cairn.fleet import schedule
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.watch import Attempt
from cairn.state import runstate
from cairn.state.layout import discover
from fleet.fleet_setup import (
    agent_env,
    agent_log,
    finish,
    fleet_repo,
    record,
    supervisor,
    wait_line,
)

BLOCKER = "no progress in 2 dispatches: the agent was denied Bash curl -s https://example.com"


def test_a_run_that_made_no_progress_needs_input_and_is_never_retried(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"ni": 3}, max_turns=2, retry_backoff="5s")
    env = agent_env(tmp_path)
    proc = supervisor(repo, env, "--once")
    retrying = wait_line(proc, "ticket_retrying")  # its first attempt hit the turn cap
    assert retrying["ticket"] == "ni"
    _, _, layout = discover(repo)
    run_id = layout.latest_run("ni")
    assert run_id is not None
    runstate.interrupt(runstate.RunRef(layout, "ni", run_id), None, "no_progress", None, BLOCKER)

    code, lines = finish(proc, timeout=60)

    assert code == 1, lines
    saved = record(repo, "ni")
    assert (saved["state"], saved["attempt"], saved["detail"]) == ("needs_input", 1, BLOCKER)
    assert not [e for e in lines if e["event"] == "ticket_started"]  # never retried
    assert [e["event"] for e in agent_log(env, "ni")].count("start") == 2  # attempt 1's turns


def _record() -> FleetTicket:
    return msgspec.convert(
        {
            "ticket": "N-1",
            "plan": "cairn-queue/N-1.md",
            "state": "running",
            "attempt": 1,
            "updated": datetime.now().astimezone(),
        },
        FleetTicket,
    )


def test_the_child_outcome_needs_input_is_read_as_such() -> None:
    attempt = Attempt.__new__(Attempt)  # what the child printed, without a child
    attempt.outcome = {
        "status": "needs_input",
        "reason": "no_progress",
        "exit_code": 1,
        "error": BLOCKER,
        "blocker": {"denials": [{"tool": "Bash", "target": "curl"}], "last_message": "stuck"},
    }
    attempt.denied, attempt.exit_code = False, 1
    assert attempt.verdict() == ("no_progress", BLOCKER, True)


def test_needs_input_is_never_retried_whatever_the_attempts_left() -> None:
    config = msgspec.convert({"max_attempts": 3}, FleetConfig)
    now = datetime.now().astimezone()
    for needs_input in (True, False):  # from the outcome, or the journal's reason alone
        verdict = schedule.after_attempt(
            config, _record(), 1, "no_progress", BLOCKER, needs_input, now
        )
        assert (verdict.state, verdict.detail, verdict.next_attempt_at) == (
            "needs_input",
            BLOCKER,
            None,
        )
