"""Usage and rate limits with the scripted agent as a real subprocess: a run moves to the next
agent of its fallback chain and finishes there without redoing a task, waits for a known reset
when it has no fallback, and stops (resumable) when it can do neither; every limit is recorded
for the repository, so the next dispatch, and the next run, keep off the limited agent."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cairn.run import launch
from cairn.state import journal, limited
from cairn.state.layout import Layout
from helpers import cairn, scripted_project
from run.run_setup import Recorder, done, latest_summary, run_dir

TICKET = "T-1"
USAGE = "You've hit your usage limit. Try again at {at}."
SESSION = "You've hit your session limit · resets {at}"


def epoch_text(seconds_from_now: float) -> str:
    """Claude's older form, which carries the reset as Unix seconds."""
    at = int(time.time() + seconds_from_now)
    return f"Claude AI usage limit reached|{at}"


def project(
    root: Path,
    scripts: dict[str, dict[str, Any]],
    agent: dict[str, Any],
    tasks: tuple[str, ...] = ("One", "Two", "Three"),
) -> tuple[Path, Path]:
    """A repository with one scripted agent per script (``[agent]`` is the first; the others
    ``[agents.NAME]``) and a plan of ``tasks``."""
    first, *others = scripts
    tables = ""
    for name in others:
        path = root / f"{name}.yaml"
        path.write_text(json.dumps(scripts[name]))
        tables += f'\n[agents.{name}]\nkind = "scripted"\nscript = {json.dumps(str(path))}\n'
    keys = {"max_continuations": 1, **agent}
    return scripted_project(root, scripts[first], tasks, TICKET, tables, **keys)


def events(repo: Path) -> list[dict[str, Any]]:
    found, _ = journal.read(run_dir(repo))
    return found


def layout(repo: Path) -> Layout:
    return Layout(repo / ".git" / "cairn")


def test_a_usage_limit_moves_the_run_to_the_fallback_which_finishes_it(tmp_path: Path) -> None:
    limited_agent = {
        "coder": [
            [{"write": {"path": "one.txt", "content": "1\n"}}, done(1, "one.txt")],
            [{"write": {"path": "scratch.txt", "content": "half\n"}}, {"fail": epoch_text(3600)}],
        ]
    }
    fallback = {
        "coder": [
            [{"write": {"path": "two.txt", "content": "2\n"}}, done(2, "two.txt")],
            [{"write": {"path": "three.txt", "content": "3\n"}}, done(3, "three.txt")],
        ]
    }
    repo, plan = project(
        tmp_path, {"first": limited_agent, "backup": fallback}, {"fallback": ["backup"]}
    )
    sink = Recorder()
    outcome = launch.run(repo, plan, sink=sink)

    assert outcome.status == "completed", outcome
    (switched,) = [e for e in events(repo) if e["event"] == "agent_switched"]
    assert (switched["from"], switched["to"], switched["reason"]) == (
        "scripted",
        "backup",
        "usage_limit",
    )
    assert sink.named("agent_switched") == [
        {"from": "scripted", "to": "backup", "reason": "usage_limit"}
    ]
    # the fallback worked in the same tree: the first agent's uncommitted file is there
    assert (repo / "scratch.txt").read_text() == "half\n"
    # task 1 was not redone, and the summary says who did each task
    tasks = {t.number: t for t in latest_summary(repo).tasks}
    assert [tasks[n].status for n in (1, 2, 3)] == ["completed"] * 3
    assert [tasks[n].agent for n in (1, 2, 3)] == ["scripted", "backup", "backup"]
    done_events = [e for e in events(repo) if e["event"] == "task" and e["status"] == "completed"]
    assert [e["task"] for e in done_events] == [1, 2, 3]
    # the cutoff names the limit, the agent and the reset
    (cut,) = [e for e in events(repo) if e["event"] == "cutoff"]
    assert cut["reason"] == "usage_limit"
    assert cut["detail"].startswith("usage limit of scripted; resets ")
    finished = [e for e in events(repo) if e["event"] == "dispatch_finished"]
    assert [(e["agent"], e.get("failure")) for e in finished] == [
        ("scripted", "usage_limit"),
        ("backup", None),
    ]
    # the limit is the repository's: the next run keeps off the agent until the reset
    held = limited.holding(layout(repo), "scripted", datetime.now(UTC))
    assert held is not None and held.reset_known and held.limit == "usage_limit"
    assert abs((held.resets_at - datetime.now(UTC)).total_seconds() - 3600) < 30


def test_without_a_fallback_a_known_reset_is_waited_for_then_the_run_goes_on(
    tmp_path: Path,
) -> None:
    script = {
        "coder": [
            [{"write": {"path": "one.txt", "content": "1\n"}}, done(1, "one.txt")],
            [{"fail": epoch_text(8)}],
            [{"write": {"path": "two.txt", "content": "2\n"}}, done(2, "two.txt")],
        ]
    }
    repo, plan = project(tmp_path, {"solo": script}, {}, tasks=("One", "Two"))
    sink = Recorder()
    started = time.monotonic()
    outcome = launch.run(repo, plan, sink=sink)

    assert outcome.status == "completed", outcome
    (waited,) = sink.named("waiting")
    assert waited["agent"] == "scripted" and waited["reason"] == "usage_limit"
    assert 0 < waited["seconds"] <= 9
    assert time.monotonic() - started >= 1  # it slept until the reset
    assert not [e for e in events(repo) if e["event"] == "agent_switched"]
    cut = [e for e in events(repo) if e["event"] == "cutoff"]
    assert [e["reason"] for e in cut] == ["usage_limit"]


def test_without_a_fallback_or_a_known_reset_the_run_stops_resumable_naming_the_limit(
    tmp_path: Path,
) -> None:
    script = {
        "coder": [
            [{"write": {"path": "one.txt", "content": "1\n"}}, done(1, "one.txt")],
            [{"write": {"path": "half.txt", "content": "h\n"}}, {"fail": USAGE.format(at="later")}],
        ]
    }
    repo, plan = project(tmp_path, {"solo": script}, {}, tasks=("One", "Two"))
    outcome = launch.run(repo, plan, sink=Recorder())

    assert outcome.status == "interrupted" and outcome.reason == "usage_limit"
    assert outcome.exit_code == 3 and outcome.next_command == f"cairn resume {TICKET}"
    assert outcome.error is not None
    assert outcome.error.startswith("usage limit of scripted; resets at an unknown time: ")
    status = latest_summary(repo).status
    assert status.state == "interrupted" and status.reason == "usage_limit"
    assert status.detail == outcome.error
    shown = cairn("catchup", TICKET, cwd=repo)
    assert "usage_limit" in shown.stdout and "usage limit of scripted" in shown.stdout
    # a guessed hold (no reset said): the agent is kept off for a while, then tried again
    held = limited.holding(layout(repo), "scripted", datetime.now(UTC))
    assert held is not None and not held.reset_known


def test_on_limit_stop_never_waits_and_a_resume_before_the_reset_stops_again(
    tmp_path: Path,
) -> None:
    script = {
        "coder": [
            [{"write": {"path": "one.txt", "content": "1\n"}}, done(1, "one.txt")],
            [{"fail": epoch_text(600)}],
            [{"write": {"path": "two.txt", "content": "2\n"}}, done(2, "two.txt")],
        ]
    }
    repo, plan = project(tmp_path, {"solo": script}, {"on_limit": "stop"}, tasks=("One", "Two"))
    outcome = launch.run(repo, plan, sink=Recorder())
    assert outcome.status == "interrupted" and outcome.reason == "usage_limit"
    assert "resets " in str(outcome.error) and "unknown" not in str(outcome.error)
    # resumed before the reset, with on_limit = "stop": it stops again without a dispatch
    again = launch.resume(repo, TICKET, sink=Recorder())
    assert again.status == "interrupted" and again.reason == "usage_limit"
    assert again.dispatches == 0


def test_failback_returns_to_the_primary_once_its_limit_has_reset(tmp_path: Path) -> None:
    primary = {
        "coder": [
            [{"write": {"path": "one.txt", "content": "1\n"}}, done(1, "one.txt")],
            [{"fail": epoch_text(2)}],
            [{"write": {"path": "three.txt", "content": "3\n"}}, done(3, "three.txt")],
        ]
    }
    backup = {
        "coder": [
            [{"write": {"path": "two.txt", "content": "2\n"}}, done(2, "two.txt")],
            [{"sleep": 3}, {"say": "still working"}],
            [{"say": "nothing more"}],
        ]
    }
    repo, plan = project(tmp_path, {"first": primary, "backup": backup}, {"fallback": ["backup"]})
    outcome = launch.run(repo, plan, sink=Recorder())
    assert outcome.status == "completed", outcome
    switches = [
        (e["from"], e["to"], e["reason"]) for e in events(repo) if e["event"] == "agent_switched"
    ]
    assert switches == [("scripted", "backup", "usage_limit"), ("backup", "scripted", "failback")]
    tasks = {t.number: t.agent for t in latest_summary(repo).tasks}
    assert tasks == {1: "scripted", 2: "backup", 3: "scripted"}


def test_usage_is_kept_per_agent_and_catchup_names_the_agents(tmp_path: Path) -> None:
    priced = {"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.5}
    primary = {
        "coder": [
            [{"usage": priced}, {"write": {"path": "one.txt", "content": "1\n"}}, done(1)],
            [{"fail": epoch_text(3600)}],
        ]
    }
    backup = {"coder": [[{"usage": {**priced, "cost_usd": 0.25}}, done(2), done(3)]]}
    repo, plan = project(tmp_path, {"first": primary, "backup": backup}, {"fallback": ["backup"]})
    outcome = launch.run(repo, plan, sink=Recorder())

    assert outcome.status == "completed"
    used = outcome.usage_by_agent
    assert list(used) == ["scripted", "backup"]
    assert used["scripted"]["cost_usd"] == 0.5 and used["backup"]["cost_usd"] == 0.25
    assert outcome.usage["cost_usd"] == 0.75
    summary_text = next(run_dir(repo).glob("*run-summary.md")).read_text()
    assert "**Usage of scripted:**" in summary_text and "**Usage of backup:**" in summary_text
    shown = cairn("catchup", TICKET, "--json", cwd=repo)
    report = json.loads(shown.stdout)
    assert report["usage_by_agent"]["backup"]["cost_usd"] == 0.25
    assert [d["agent"] for d in report["dispatches"]] == ["scripted", "backup"]


def test_ctrl_c_while_waiting_for_a_reset_stops_the_run_resumable(tmp_path: Path) -> None:
    script = {
        "coder": [
            [{"write": {"path": "one.txt", "content": "1\n"}}, done(1, "one.txt")],
            [{"fail": epoch_text(1800)}],
            [done(2)],
        ]
    }
    repo, plan = project(tmp_path, {"solo": script}, {}, tasks=("One", "Two"))
    child = subprocess.Popen(
        [sys.executable, "-m", "cairn", "run", str(plan), "--json"],
        cwd=repo,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    for line in child.stdout:  # the live line, then Ctrl+C
        if json.loads(line)["event"] == "waiting":
            waited = json.loads(line)
            break
    assert 1700 < waited["seconds"] <= 1800 and waited["reason"] == "usage_limit"
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    rest = child.stdout.read()
    assert child.wait(timeout=30) == 3
    assert time.monotonic() - sent < 10  # not after the reset
    last = json.loads(rest.strip().splitlines()[-1])
    assert last["status"] == "interrupted" and last["next_command"] == f"cairn resume {TICKET}"


def test_a_run_started_while_its_agent_is_at_a_limit_goes_to_the_fallback_at_once(
    tmp_path: Path,
) -> None:
    primary = {"coder": [[{"write": {"path": "one.txt", "content": "1\n"}}, done(1), done(2)]]}
    backup = {"coder": [[{"write": {"path": "two.txt", "content": "2\n"}}, done(1), done(2)]]}
    repo, plan = project(
        tmp_path, {"first": primary, "backup": backup}, {"fallback": ["backup"]}, tasks=("A", "B")
    )
    seen = datetime.now(UTC)
    limited.note(
        layout(repo),
        limited.Held(
            agent="scripted",
            kind="scripted",
            limit="usage_limit",
            resets_at=seen + timedelta(hours=1),
            reset_known=True,
            seen_at=seen,
            text="You've hit your session limit · resets 11am",
            ticket="OTHER-1",
        ),
    )
    sink = Recorder()
    outcome = launch.run(repo, plan, sink=sink)

    assert outcome.status == "completed"
    assert sink.named("agent_switched") == [
        {"from": "scripted", "to": "backup", "reason": "usage_limit"}
    ]
    finished = [e for e in events(repo) if e["event"] == "dispatch_finished"]
    assert [e["agent"] for e in finished] == ["backup"]  # never a dispatch on the held agent
    assert not (repo / "one.txt").exists() and (repo / "two.txt").exists()


def test_a_rate_limit_without_a_fallback_or_a_reset_stops_the_run_and_holds_the_agent(
    tmp_path: Path,
) -> None:
    script = {
        "coder": [
            [{"write": {"path": "one.txt", "content": "1\n"}}, done(1, "one.txt")],
            [{"fail": "API Error: 429 rate_limit_error: Number of requests exceeds your rate"}],
        ]
    }
    repo, plan = project(tmp_path, {"solo": script}, {}, tasks=("One", "Two"))
    outcome = launch.run(repo, plan, sink=Recorder())
    assert outcome.status == "interrupted" and outcome.reason == "rate_limit"
    assert str(outcome.error).startswith("rate limit of scripted; resets at an unknown time: ")
    held = limited.holding(layout(repo), "scripted", datetime.now(UTC))
    assert held is not None and held.limit == "rate_limit" and not held.reset_known
    assert (held.resets_at - held.seen_at).total_seconds() == limited.UNKNOWN_HOLD["rate_limit"]


def test_a_task_reported_again_by_the_fallback_keeps_the_agent_that_completed_it(
    tmp_path: Path,
) -> None:
    primary = {"coder": [[done(1)], [{"fail": epoch_text(3600)}]]}
    backup = {"coder": [[done(1, outcome="again"), done(2)]]}
    repo, plan = project(
        tmp_path, {"first": primary, "backup": backup}, {"fallback": ["backup"]}, tasks=("A", "B")
    )
    assert launch.run(repo, plan, sink=Recorder()).status == "completed"
    tasks = {t.number: t for t in latest_summary(repo).tasks}
    assert (tasks[1].agent, tasks[1].outcome) == ("scripted", "again")
    assert tasks[2].agent == "backup"


def test_a_limit_whose_reset_is_already_past_is_not_prompted_again_and_again(
    tmp_path: Path,
) -> None:
    # the CLIs round a reset's minute down, so a reset just past means: go on at once; but an
    # agent that says so every time is not prompted without end (each go counts as a wait)
    past = epoch_text(-60)
    script = {"coder": [[done(1)], *[[{"fail": past}]] * 10]}
    repo, plan = project(tmp_path, {"solo": script}, {"max_continuations": 2}, tasks=("A", "B"))
    outcome = launch.run(repo, plan, sink=Recorder())
    assert outcome.status == "interrupted" and outcome.reason == "usage_limit"
    assert outcome.dispatches == 4  # the first, then 3 goes (max_continuations + 1): not 11
