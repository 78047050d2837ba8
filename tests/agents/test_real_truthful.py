"""Truthful runs with the real CLIs (Claude Code 2.1.328, Codex 0.169.0) against cairn's scripted
model server: the permission preset a new user gets without ``agent.command``, what the agent was
denied, the API's error text, transient API errors retried, the transcript of every dispatch,
and no stale budget directive in a resumed session. Same harness and skip rules as
``real_agents.py`` and ``conftest.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents.real_agents import (
    BUDGET,
    HANDOFF,
    TICKET,
    Real,
    bash_tool,
    capped_then_done,
    codex_provider_config,
    exec_tool,
    hook_context,
    latest,
    no_traceback,
    outcome,
    write_tool,
)
from helpers import git

pytestmark = pytest.mark.slow

FAST_RETRIES = {"api_retry_backoff_seconds": 0.1}


def commit_and_report(task: int, name: str) -> str:
    return (
        f"git add {name} && git commit -qm 'task {task}' && "
        f"cairn task done {task} --files {name} --outcome '{name} written'"
    )


def transcript_lines(p: Real, name: str) -> list[dict[str, Any]]:
    path = p.run_dir / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_surfaced(p: Real, result: Any, denied: str, *, cost: bool) -> None:
    """What the agent was denied and what the run cost, everywhere cairn reports a run: the
    ``--json`` events and outcome, the change summary, ``catchup``, ``status --json``, and the
    dispatch's transcript through ``cairn logs``."""
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert any(e.get("event") == "denials" and denied in json.dumps(e) for e in events), events
    run_usage = outcome(result)["usage"]
    assert run_usage["total_tokens"] > 0, run_usage
    assert (run_usage["cost_usd"] is not None) == cost, run_usage
    (summary,) = p.run_dir.glob("*change-summary*.md")
    assert "**Blocked:**" in summary.read_text() and denied in summary.read_text()
    caught = p.cairn("catchup", TICKET)
    assert caught.returncode == 0 and "blocked:" in caught.stdout and denied in caught.stdout
    caught_json = json.loads(p.cairn("catchup", TICKET, "--json").stdout)
    assert denied in json.dumps(caught_json["denials"])
    assert caught_json["usage"]["total_tokens"] == run_usage["total_tokens"]
    status = json.loads(p.cairn("status", "--json").stdout)
    (row,) = [r for r in status if r["ticket"] == TICKET]
    assert row["usage"]["output_tokens"] == run_usage["output_tokens"], row
    logs = p.cairn("logs", TICKET)
    assert logs.returncode == 0 and denied.split()[0] in logs.stdout, logs.stdout


# --- the preset: a new user's first run ---------------------------------------------------------


def test_claude_preset_edits_commits_reports_and_denies_curl(
    real: Callable[..., Real], claude_bin: Path
) -> None:
    def scenario(repo: Path) -> dict[str, Any]:
        return {
            "anthropic": [
                {"tool": write_tool(repo / "a.txt", "one\n")},
                {"tool": bash_tool(commit_and_report(1, "a.txt") + " && cairn task start 2")},
                {"tool": bash_tool("curl -s http://127.0.0.1:9/")},  # outside the preset
                {"tool": write_tool(repo.parent / "outside.txt", "no\n")},  # outside the tree
                {"tool": bash_tool("pytest --version")},  # agent.allow
                {"tool": write_tool(repo / "b.txt", "two\n")},
                {"tool": bash_tool(commit_and_report(2, "b.txt") + " && git log --oneline")},
                {"tool": write_tool(repo / "c.txt", "three\n")},
                {"tool": bash_tool(commit_and_report(3, "c.txt") + " && git status --short")},
                {"text": "All three tasks are done."},
            ]
        }

    p = real("claude-code", scenario, no_command=True, max_turns=20, agent={"allow": ["pytest"]})
    result = p.run()
    no_traceback(result)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert outcome(result)["status"] == "completed"
    assert git(p.repo, "status", "--porcelain").strip() == ""
    assert git(p.repo, "log", "--format=%s").split("\n")[:3] == ["task 3", "task 2", "task 1"]
    assert not (p.tmp / "outside.txt").exists()

    (finished,) = p.events("dispatch_finished")
    assert finished["reason"] == "completed"
    assert finished["denials"] == [
        {"tool": "Bash", "target": "curl -s http://127.0.0.1:9/"},
        {"tool": "Write", "target": str(p.tmp / "outside.txt")},
    ]
    assert "error" not in finished
    assert finished["usage"]["total_tokens"] > 0 and finished["usage"]["output_tokens"] > 0
    assert finished["transcript"] == "01_coder_transcript.jsonl"
    lines = transcript_lines(p, finished["transcript"])
    assert lines[0]["type"] == "system" and lines[-1]["type"] == "result"
    assert lines[-1]["permission_denials"]
    assert_surfaced(p, result, "curl -s http://127.0.0.1:9/", cost=True)
    # What the model was told about the refusals: Claude's own words.
    told = [latest(r) for r in p.requests()]
    assert any("requires approval" in t for t in told), told
    assert any("pytest" in t and "requires approval" not in t for t in told[5:6]), told[5]


def test_codex_preset_sandbox_refusals_are_denials(
    real: Callable[..., Real], codex_bin: Path
) -> None:
    scenario = {
        "openai": [
            {"tool": exec_tool("printf 'one\\n' > a.txt && " + commit_and_report(1, "a.txt"))},
            {"tool": exec_tool("curl -sS -m 5 http://127.0.0.1:9/")},  # no network
            {"tool": exec_tool("printf 'x\\n' > ../outside.txt")},  # outside the tree
            {"tool": exec_tool("printf 'two\\n' > b.txt && " + commit_and_report(2, "b.txt"))},
            {"tool": exec_tool("printf 'three\\n' > c.txt && " + commit_and_report(3, "c.txt"))},
            {"text": "All three tasks are done."},
        ]
    }
    p = real("codex", scenario, no_command=True, max_turns=20)
    codex_provider_config(p)
    result = p.run()
    no_traceback(result)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert outcome(result)["status"] == "completed"
    assert git(p.repo, "status", "--porcelain").strip() == ""
    assert git(p.repo, "log", "--format=%s").split("\n")[:3] == ["task 3", "task 2", "task 1"]

    (finished,) = p.events("dispatch_finished")
    # The write outside the tree was refused too, but Codex 0.169.0 does not always put a
    # command its sandbox denied into the --json stream (see tests/fixtures/README.md).
    curl = {"tool": "exec", "target": "curl -sS -m 5 http://127.0.0.1:9/"}
    outside = {"tool": "exec", "target": "printf 'x\\n' > ../outside.txt"}
    assert finished["denials"] in ([curl], [curl, outside]), finished["denials"]
    assert finished["usage"]["input_tokens"] > 0
    assert not (p.tmp / "outside.txt").exists()
    lines = transcript_lines(p, finished["transcript"])
    assert lines[0]["type"] == "thread.started" and lines[-1]["type"] == "turn.completed"
    assert_surfaced(p, result, "curl -sS -m 5 http://127.0.0.1:9/", cost=False)


# --- API errors: the text, and a retry when it is transient -------------------------------------


@pytest.mark.parametrize("kind", ["claude-code", "codex"])
def test_api_500_every_time_is_retried_then_an_error_cutoff_with_its_text(
    real: Callable[..., Real], kind: str, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue("claude_bin" if kind == "claude-code" else "codex_bin")
    outage = {"error": 500, "message": "scripted outage"}
    p = real(kind, {"after_end": outage}, max_turns=3, agent=FAST_RETRIES)
    result = p.run(env={"CLAUDE_CODE_MAX_RETRIES": "0"})
    no_traceback(result)
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert outcome(result)["reason"] == "error"
    expected = "API Error: 500 scripted outage" if kind == "claude-code" else "demand"
    (finished,) = p.events("dispatch_finished")
    assert expected in finished["error"] and finished["error"] == finished["detail"], finished
    retried = p.events("dispatch_retried")
    assert [(e["attempt"], e["of"], e["delay"]) for e in retried] == [(1, 2, 0.1), (2, 2, 0.2)]
    assert all(expected in e["error"] for e in retried)
    assert len(p.requests()) == 3  # the first call and two retries
    assert "retrying" in result.stdout + result.stderr
    assert expected in outcome(result)["error"], outcome(result)
    caught = p.cairn("catchup", TICKET)
    assert caught.returncode == 0 and expected in caught.stdout, caught.stdout
    plain = p.cairn("catchup", TICKET, "--json")
    assert expected in json.loads(plain.stdout)["error"]
    logs = p.cairn("logs", TICKET).stdout.splitlines()  # labelled an error, not a message
    assert any(line.lstrip().startswith("error: ") and expected in line for line in logs), logs
    assert not any(line.lstrip().startswith("says: ") and expected in line for line in logs)


@pytest.mark.parametrize("kind", ["claude-code", "codex"])
def test_api_500_once_then_ok_completes_thanks_to_the_retry(
    real: Callable[..., Real], kind: str, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue("claude_bin" if kind == "claude-code" else "codex_bin")
    blip = {"error": 500, "message": "scripted blip"}

    def scenario(repo: Path) -> dict[str, Any]:
        if kind == "claude-code":
            work = [
                {"tool": write_tool(repo / "a.txt", "one\n")},
                {"tool": bash_tool("cairn task done 1 --files a.txt")},
            ]
        else:
            work = [{"tool": exec_tool("printf 'one\\n' > a.txt && cairn task done 1")}]
        api = "anthropic" if kind == "claude-code" else "openai"
        return {api: [blip, *work, {"text": "Done."}]}

    p = real(kind, scenario, tasks=("One",), max_turns=5, agent=FAST_RETRIES)
    result = p.run(env={"CLAUDE_CODE_MAX_RETRIES": "0"})
    no_traceback(result)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert outcome(result)["status"] == "completed"
    (retried,) = p.events("dispatch_retried")
    assert "500" in retried["error"] or "demand" in retried["error"], retried
    (finished,) = p.events("dispatch_finished")
    assert finished["reason"] == "completed"
    assert (p.repo / "a.txt").read_text() == "one\n"


# --- a resumed Claude session is not told it has no turns left ----------------------------------


def test_claude_resume_first_request_has_no_stale_budget(
    real: Callable[..., Real], claude_bin: Path
) -> None:
    p = real(
        "claude-code",
        capped_then_done,  # the handoff after `cairn resume` is its 4th request
        tasks=("One",),
        max_turns=3,
        budget_pressure_turns=2,
        max_continuations=0,
    )
    stopped = p.run()
    no_traceback(stopped)
    assert stopped.returncode == 3, (stopped.stdout, stopped.stderr)
    resumed = p.resume()
    no_traceback(resumed)
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)

    requests = p.requests()
    assert [r["entry"] for r in requests] == [0, 1, 2, 3, 4]
    # Dispatch 1: the directive after turns 1 and 2 (2 and 1 left); none after the cap.
    assert [f"{BUDGET} 2 turn(s) left" in " ".join(hook_context(r)) for r in requests[:3]] == [
        False,
        True,
        False,
    ]
    first_after_resume = requests[3]
    assert HANDOFF in latest(first_after_resume)
    assert hook_context(first_after_resume) == []
    assert BUDGET not in latest(first_after_resume)
    assert not any("0 turn(s) left" in json.dumps(r["body"]) for r in requests)
    assert p.events("dispatch_finished")[-1]["transcript"] == "02_coder_transcript.jsonl"
    assert TICKET in p.marker_path.parent.name
