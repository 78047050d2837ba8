"""What a dispatch reports reaches the user: denials, the agent's error text, usage and cost,
the ``agent.max_cost_usd`` budget and transcripts; in-process (``launch.run`` with a recording
sink) and through the real CLI, with the scripted agent as a real subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cairn.run import launch
from cairn.state import journal
from cairn.state.layout import artifacts
from helpers import cairn, git, scripted_project
from run.run_setup import TICKET, Recorder, latest_summary, run_dir

CURL = "curl https://example.com/install.sh"


def usage(tokens_in: int, tokens_out: int, cost: float) -> dict[str, Any]:
    return {"usage": {"input_tokens": tokens_in, "output_tokens": tokens_out, "cost_usd": cost}}


def done(n: int) -> dict[str, Any]:
    return {"cairn": ["task", "done", str(n), "--outcome", "works"]}


DENIED_AND_FAILED = {
    "coder": [
        [
            usage(120_000, 2_000, 0.5),
            {"deny": {"tool": "Bash", "target": CURL}},
            {"deny": {"tool": "Bash", "target": "curl -s x"}},
            {"deny": {"tool": "Bash", "target": "wget y"}},
            {"deny": {"tool": "Write", "target": "/etc/hosts"}},
            {"deny": {"tool": "Write", "target": "/etc/passwd"}},
            {"write": {"path": "one.txt", "content": "1\n"}},
            done(1),
        ],
        [{"fail": "API Error: 500 Internal Server Error"}],
    ]
}


def test_denials_error_and_usage_reach_the_sink_the_outcome_and_the_summary(
    tmp_path: Path,
) -> None:
    repo, plan = scripted_project(tmp_path, DENIED_AND_FAILED)
    sink = Recorder()
    outcome = launch.run(repo, plan, sink=sink)

    assert outcome.status == "interrupted" and outcome.reason == "error"
    assert outcome.exit_code == 3
    assert outcome.error == "API Error: 500 Internal Server Error"
    assert outcome.usage["total_tokens"] == 122_000 and outcome.usage["cost_usd"] == 0.5
    assert outcome.denials[0] == {"tool": "Bash", "target": CURL}
    assert len(outcome.denials) == 5

    (finished,) = sink.named("dispatch_finished")
    assert finished["error"] == "API Error: 500 Internal Server Error"
    assert finished["usage"]["input_tokens"] == 120_000
    (denied,) = sink.named("denials")
    assert denied["count"] == 5
    assert denied["message"] == (
        "agent was denied 5 tool calls: Bash ×3 (curl https://example.com/install.sh), "
        "Write ×2 (/etc/hosts) — allow them with agent.allow or agent.command; see docs/agents.md"
    )
    (cut,) = sink.named("cutoff")
    assert cut["reason"] == "error" and cut["detail"] == "API Error: 500 Internal Server Error"
    (end,) = sink.named("run_finished")
    assert end["usage_text"] == "122k tokens · $0.50"

    current = latest_summary(repo)
    assert current.status.reason == "error"
    assert current.status.detail == "API Error: 500 Internal Server Error"
    assert current.blocked is not None and current.blocked.startswith(
        "agent was denied 5 tool calls: Bash ×3"
    )
    assert current.usage is not None and current.usage.total_tokens == 122_000
    assert current.usage.cost_usd == 0.5

    events, _ = journal.read(run_dir(repo))
    (record,) = [e for e in events if e["event"] == "dispatch_finished"]
    assert record["denials"][0] == {"tool": "Bash", "target": CURL}
    assert record["usage"]["total_tokens"] == 122_000
    assert record["error"] == "API Error: 500 Internal Server Error"
    assert record["transcript"] == "01_coder_transcript.jsonl"
    lines = (run_dir(repo) / "01_coder_transcript.jsonl").read_text().splitlines()
    kinds = [json.loads(line)["type"] for line in lines]
    assert kinds[0] == "turn_started" and "error" in kinds
    interrupted = [e for e in events if e["event"] == "run_interrupted"]
    assert interrupted[-1]["detail"] == "API Error: 500 Internal Server Error"


def test_the_cli_prints_denials_error_and_usage(tmp_path: Path) -> None:
    repo, plan = scripted_project(tmp_path, DENIED_AND_FAILED)
    result = cairn("run", str(plan), cwd=repo)
    assert result.returncode == 3, result.stderr
    out = result.stdout
    assert "dispatch 1 ended: error after 2 turns: API Error: 500 Internal Server Error" in out
    assert "  agent was denied 5 tool calls: Bash ×3 (curl https://example.com/install.sh)" in out
    assert "cutoff: error (API Error: 500 Internal Server Error) in coder dispatch" in out
    assert " interrupted in " in out and "· 122k tokens · $0.50" in out
    assert "  Interrupted — error: API Error: 500 Internal Server Error" in out


def test_json_output_carries_denials_error_and_usage(tmp_path: Path) -> None:
    repo, plan = scripted_project(tmp_path, DENIED_AND_FAILED)
    result = cairn("run", str(plan), "--json", cwd=repo)
    assert result.returncode == 3, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    (finished,) = [e for e in lines if e.get("event") == "dispatch_finished"]
    assert finished["error"] == "API Error: 500 Internal Server Error"
    assert len(finished["denials"]) == 5 and finished["usage"]["cost_usd"] == 0.5
    (denied,) = [e for e in lines if e.get("event") == "denials"]
    assert denied["count"] == 5
    outcome = lines[-1]
    assert outcome["error"] == "API Error: 500 Internal Server Error"
    assert outcome["usage"]["total_tokens"] == 122_000
    assert len(outcome["denials"]) == 5


def test_a_completed_run_has_no_error_and_counts_every_turn(tmp_path: Path) -> None:
    script = {
        "coder": [
            [usage(1000, 10, 0.01), done(1)],
            [usage(2000, 20, 0.02), {"usage": {"cache_read_tokens": 500}}, done(2)],
        ]
    }
    repo, plan = scripted_project(tmp_path, script)
    sink = Recorder()
    outcome = launch.run(repo, plan, sink=sink)
    assert outcome.status == "completed" and outcome.error is None
    assert outcome.usage["total_tokens"] == 3530
    assert outcome.usage["cost_usd"] == pytest.approx(0.03)
    assert outcome.denials == []
    assert sink.named("denials") == []
    current = latest_summary(repo)
    assert current.status.state == "completed" and current.blocked is None
    assert current.usage is not None and current.usage.cache_read_tokens == 500
    text = next(a.path for a in artifacts(run_dir(repo)) if a.name == "change-summary")
    assert '  "usage": {\n    "input_tokens": 3000,' in text.read_text()


def test_max_cost_usd_cuts_the_run_off_mid_dispatch_and_resume_gets_a_fresh_budget(
    tmp_path: Path,
) -> None:
    turn = [usage(1000, 100, 0.06), {"write": {"path": "a.txt", "content": "a\n"}}]
    script = {
        "coder": [
            turn,
            [usage(1000, 100, 0.06), {"append": {"path": "a.txt", "content": "b\n"}}],
            [usage(1000, 100, 0.06), done(1)],
            [usage(1000, 100, 0.01), done(2)],
        ]
    }
    repo, plan = scripted_project(tmp_path, script, max_cost_usd=0.1, max_continuations=2)
    sink = Recorder()
    outcome = launch.run(repo, plan, sink=sink)

    assert outcome.status == "interrupted" and outcome.reason == "budget"
    assert outcome.exit_code == 3
    assert outcome.error == "cost $0.12, over agent.max_cost_usd $0.10"
    assert len(sink.named("dispatch_started")) == 1  # no continuation after a budget cutoff
    assert [t["turn"] for t in sink.named("turn")] == [1, 2]  # stopped after turn 2
    (cut,) = sink.named("cutoff")
    assert cut["reason"] == "budget" and cut["snapshot"]
    current = latest_summary(repo)
    assert current.status.reason == "budget"
    assert current.status.detail == "cost $0.12, over agent.max_cost_usd $0.10"
    snap = git(repo, "show", f"refs/cairn/wip/{TICKET}:a.txt")
    assert snap == "a\nb\n"  # the work of both turns is in the snapshot

    resumed = launch.resume(repo, TICKET, sink=Recorder())
    assert resumed.status == "completed", resumed
    # the run's totals count both sessions: 4 turns of usage
    assert resumed.usage["total_tokens"] == 4400
    assert resumed.usage["cost_usd"] == pytest.approx(0.19)
    final = latest_summary(repo)
    assert final.usage is not None and final.usage.total_tokens == 4400


def test_max_cost_usd_is_checked_after_a_dispatch_without_usage_events(tmp_path: Path) -> None:
    # one dispatch over budget: the run stops before the next dispatch would start
    script = {"coder": [[usage(10, 1, 2.0), done(1)], [done(2)]]}
    repo, plan = scripted_project(tmp_path, script, max_cost_usd=1.0)
    outcome = launch.run(repo, plan, sink=Recorder())
    assert outcome.reason == "budget"
    assert latest_summary(repo).status.reason == "budget"


def test_status_json_shows_usage(tmp_path: Path) -> None:
    repo, plan = scripted_project(tmp_path, DENIED_AND_FAILED)
    assert cairn("run", str(plan), cwd=repo).returncode == 3
    result = cairn("status", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert row["usage"]["total_tokens"] == 122_000 and row["usage"]["cost_usd"] == 0.5


@pytest.mark.parametrize(
    ("action", "problem"),
    [
        ({"usage": {"input_tokens": 1.5}}, "usage: input_tokens must be a number ≥ 0"),
        ({"usage": {"tokens": 1}}, "usage takes a mapping of"),
        ({"deny": {"target": "x"}}, "deny takes {tool, target}"),
        ({"fail": ""}, "fail takes the error text"),
    ],
)
def test_a_bad_report_action_is_refused_before_anything_is_written(
    tmp_path: Path, action: dict[str, Any], problem: str
) -> None:
    repo, plan = scripted_project(tmp_path, {"coder": [[action]]})
    result = cairn("run", str(plan), cwd=repo)
    assert result.returncode == 2 and problem in result.stderr, result.stderr
    assert not (repo / ".git/cairn/tickets").exists()
