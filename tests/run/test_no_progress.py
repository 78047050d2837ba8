"""The no-progress stop (``agent.max_idle_dispatches``) with the scripted agent as a real
subprocess: an agent that changes nothing is not prompted again and again, the run ends
``needs_input`` with the blocker, resumably; an agent that makes progress is never stopped by it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cairn.run import launch
from cairn.state import journal, marker
from helpers import cairn, scripted_project
from run.run_setup import Recorder, latest_summary, run_dir

TICKET = "T-1"
CURL = "curl -s https://example.com/x"
STUCK = "I cannot continue without curl."
DENIED_THEN_STUCK = [{"deny": {"tool": "Bash", "target": CURL}}, {"say": STUCK}]


def finished(repo: Path) -> list[dict[str, Any]]:
    events, _ = journal.read(run_dir(repo))
    return [e for e in events if e["event"] == "dispatch_finished"]


def test_an_agent_denied_what_it_needs_stops_as_needs_input_in_two_dispatches(
    tmp_path: Path,
) -> None:
    script = {"coder": [DENIED_THEN_STUCK] * 40}
    repo, plan = scripted_project(tmp_path, script, max_turns=30, max_continuations=5)
    sink = Recorder()
    outcome = launch.run(repo, plan, sink=sink)

    assert outcome.status == "needs_input" and outcome.reason == "no_progress"
    assert outcome.exit_code == 1
    assert outcome.dispatches == 2 and outcome.turns == 2  # not 30 turns, not 6 dispatches
    assert outcome.blocker == {
        "denials": [{"tool": "Bash", "target": CURL}] * 2,
        "last_message": STUCK,
    }
    assert outcome.error is not None and "\n" not in outcome.error
    assert CURL in outcome.error and STUCK in outcome.error
    assert outcome.next_command == f"cairn resume {TICKET}"
    assert [d["progress"] for d in finished(repo)] == [False, False]
    (told,) = sink.named("needs_input")
    assert told["blocker"] == outcome.blocker and told["error"] == outcome.error
    # recorded as the other endings are: summary, journal, marker (kept: resumable)
    current = latest_summary(repo)
    assert current.status.reason == "no_progress" and current.status.detail == outcome.error
    events, _ = journal.read(run_dir(repo))
    (stopped,) = [e for e in events if e["event"] == "run_interrupted"]
    assert stopped["reason"] == "no_progress" and stopped["detail"] == outcome.error
    kept = marker.read(repo / ".git/cairn/tickets" / TICKET / ".in-progress.yaml")
    assert kept is not None and kept.owner is None
    summary_text = next(run_dir(repo).glob("*run-summary.md")).read_text()
    assert "needs_input (no_progress)" in summary_text


def test_turns_that_change_nothing_end_the_dispatch_without_stuck_words(tmp_path: Path) -> None:
    # No denial, no "cannot": two stops in a row that change nothing end a dispatch.
    script = {"coder": [[{"say": "Let me think about this."}]] * 40}
    repo, plan = scripted_project(tmp_path, script, max_turns=30, max_continuations=5)
    outcome = launch.run(repo, plan, sink=Recorder())
    assert outcome.status == "needs_input" and outcome.exit_code == 1
    assert [d["turns"] for d in finished(repo)] == [2, 2]
    assert outcome.blocker == {"denials": [], "last_message": "Let me think about this."}


def test_progress_resets_the_count_and_a_working_agent_is_never_stopped(tmp_path: Path) -> None:
    # Every dispatch writes a file (or reports) and then says it is stuck: progress each time,
    # so the run goes on until its continuations are used up (interrupted, not needs_input).
    def work(n: int) -> list[list[dict[str, Any]]]:
        return [
            [{"append": {"path": "notes.txt", "content": f"{n}\n"}}, {"say": STUCK}],
            [{"say": STUCK}],
        ]

    report = [[{"cairn": ["task", "start", "1"]}, {"say": STUCK}], [{"say": STUCK}]]
    script = {"coder": work(1) + report + work(2)}
    repo, plan = scripted_project(tmp_path, script, max_turns=30, max_continuations=2)
    outcome = launch.run(repo, plan, sink=Recorder())
    assert outcome.status == "interrupted", outcome
    assert outcome.reason == "incomplete" and outcome.dispatches == 3
    assert [d["progress"] for d in finished(repo)] == [True, True, True]
    assert [d["turns"] for d in finished(repo)] == [2, 2, 2]


def test_an_idle_dispatch_between_working_ones_does_not_stop_the_run(tmp_path: Path) -> None:
    write = {"write": {"path": "a.txt", "content": "a\n"}}
    script = {
        "coder": [
            [{"say": STUCK}],  # dispatch 1: idle
            [write, {"cairn": ["task", "done", "1"]}, {"say": STUCK}],  # dispatch 2: progress,
            [{"say": STUCK}],  # then a stop that changes nothing ends it
            [{"say": STUCK}],  # dispatch 3: idle (count 1 again)
            [{"cairn": ["task", "done", "2"]}],  # dispatch 4: done
        ]
    }
    repo, plan = scripted_project(tmp_path, script, max_turns=30, max_continuations=5)
    outcome = launch.run(repo, plan, sink=Recorder())
    assert outcome.status == "completed", outcome
    assert [d["progress"] for d in finished(repo)] == [False, True, False, True]


def test_zero_turns_the_stop_off(tmp_path: Path) -> None:
    script = {"coder": [DENIED_THEN_STUCK] * 8}
    repo, plan = scripted_project(
        tmp_path, script, max_turns=3, max_continuations=1, max_idle_dispatches=0
    )
    outcome = launch.run(repo, plan, sink=Recorder())
    assert outcome.status == "interrupted" and outcome.reason == "max_turns"
    assert outcome.turns == 6


def test_cli_says_needs_input_and_what_to_do_and_status_shows_why_then_resume(
    tmp_path: Path,
) -> None:
    script = {
        "coder": [DENIED_THEN_STUCK] * 4
        + [[{"cairn": ["task", "done", "1"]}, {"cairn": ["task", "done", "2"]}]]
    }
    repo, plan = scripted_project(tmp_path, script, max_turns=30, max_continuations=5)
    result = cairn("run", str(plan), cwd=repo)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "needs input: ticket T-1" in result.stdout
    assert 'allow = ["curl"]' in result.stdout and f"cairn resume {TICKET}" in result.stdout
    assert STUCK in result.stdout
    assert "Traceback" not in result.stderr

    shown = cairn("status", cwd=repo)
    assert shown.returncode == 0 and "needs input" in shown.stdout, shown.stdout
    assert CURL in shown.stdout
    (row,) = json.loads(cairn("status", "--json", cwd=repo).stdout)
    assert row["state"] == "needs_input" and STUCK in row["why"]
    caught = cairn("catchup", TICKET, cwd=repo)  # catchup agrees with status
    assert caught.returncode == 0 and caught.stdout.startswith(f"ticket {TICKET}: needs input")
    assert f"cairn resume {TICKET}" in caught.stdout
    report = json.loads(cairn("catchup", TICKET, "--json", cwd=repo).stdout)
    assert report["state"] == "needs_input" and report["next_command"] == f"cairn resume {TICKET}"
    paragraph = cairn("catchup", TICKET, "--format", "context", cwd=repo).stdout
    assert paragraph.startswith("The agent stopped for want of input")

    resumed = cairn("resume", TICKET, "--json", cwd=repo)
    assert resumed.returncode == 1, resumed.stdout  # still stuck: two more idle dispatches
    last = json.loads(resumed.stdout.splitlines()[-1])
    assert last["status"] == "needs_input" and last["reason"] == "no_progress"
    assert last["exit_code"] == 1 and "curl" in last["error"]
    done = cairn("resume", TICKET, "--json", cwd=repo)
    assert done.returncode == 0, done.stdout
    assert json.loads(done.stdout.splitlines()[-1])["status"] == "completed"


def test_the_blocker_is_the_coders_own_words_never_the_reviewers(tmp_path: Path) -> None:
    # The fix round's coder has nothing left to play: it says nothing and changes nothing.
    script = {
        "coder": [[{"cairn": ["task", "done", "1"]}, {"cairn": ["task", "done", "2"]}]],
        "reviewer": [[{"cairn": ["finding", "add", "F1", "a bug"]}, {"say": "I cannot go on."}]],
    }
    repo, plan = scripted_project(tmp_path, script, max_continuations=3)
    config = repo / "cairn.toml"
    config.write_text(config.read_text().replace('["implement"]', '["implement", "review", "fix"]'))
    outcome = launch.run(repo, plan, sink=Recorder())
    assert outcome.status == "needs_input", outcome
    assert outcome.blocker == {"denials": [], "last_message": None}
    assert outcome.error == "no progress in 2 dispatches in a row"


def test_what_to_do_is_the_agent_s_own_fix() -> None:
    """Claude Code's refused commands go through agent.allow; Codex's through its sandbox
    (agent.allow does not apply to Codex)."""
    from cairn.cli.commands.run import needs_input_lines
    from cairn.run.orchestrator.outcome import RunOutcome

    def told(tool: str) -> str:
        blocker = {"denials": [{"tool": tool, "target": CURL}], "last_message": STUCK}
        outcome = RunOutcome(
            ticket=TICKET, run="R", status="needs_input", exit_code=1, run_dir="d", blocker=blocker
        )
        return "\n".join(needs_input_lines(outcome))

    assert 'allow = ["curl"]' in told("Bash") and f"cairn resume {TICKET}" in told("Bash")
    codex = told("exec")
    assert "agent.allow does not apply to Codex" in codex and "allow = [" not in codex
    assert f"cairn resume {TICKET}" in codex
