"""The no-progress stop with the real CLIs (Claude Code 2.1.328, Codex 0.169.0) against cairn's
scripted model server: the agent is denied ``curl`` by cairn's permission preset, says it cannot
go on, and says so again to every prompt. Before the stop, cairn re-prompted it with the
continuation prompt until the turn cap, three dispatches of 150 turns (Claude Code: 450 turns,
about 9.5M input tokens and $1,900 at the model's list price). Now the run ends ``needs_input``
within two dispatches. Same harness and skip rules as ``real_agents.py`` and ``conftest.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agents.real_agents import (
    TICKET,
    Real,
    bash_tool,
    codex_provider_config,
    exec_tool,
    no_traceback,
    outcome,
)

pytestmark = pytest.mark.slow

STUCK = "I cannot continue without curl."
# What the same run used before the stop (agent.max_turns 150, max_continuations 2, the repro
# of issue 22, measured with this scenario): the stop must spend under 5% of it.
BEFORE_INPUT_TOKENS = {"claude-code": 9_500_000, "codex": 9_500_000}


def scenario(kind: str) -> dict[str, Any]:
    if kind == "claude-code":
        return {
            "anthropic": [{"tool": bash_tool("curl -s http://127.0.0.1:9/")}],
            "after_end": STUCK,
        }
    return {
        "openai": [{"tool": exec_tool("curl -sS -m 5 http://127.0.0.1:9/")}],
        "after_end": STUCK,
    }


@pytest.mark.parametrize("kind", ["claude-code", "codex"])
def test_an_agent_denied_curl_that_cannot_go_on_ends_needs_input(
    real: Callable[..., Real], kind: str, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue("claude_bin" if kind == "claude-code" else "codex_bin")
    # cairn's defaults: 150 turns a dispatch, 2 continuations, max_idle_dispatches 2
    p = real(kind, scenario(kind), no_command=True, max_turns=150, max_continuations=2)
    if kind == "codex":
        codex_provider_config(p)
    result = p.run()
    no_traceback(result)
    assert result.returncode == 1, (result.stdout, result.stderr)
    told = outcome(result)
    assert told["status"] == "needs_input" and told["reason"] == "no_progress", told
    started = json.loads(result.stdout.splitlines()[0])
    expected = "budget: 150 turns · $10.00"
    if kind == "codex":  # Codex reports tokens only: the cost cap cannot be checked
        expected += " (not checked: codex reports no cost)"
    assert started["event"] == "run_started" and started["budget"] == expected
    assert told["exit_code"] == 1
    assert told["dispatches"] <= 3 and told["turns"] <= 6, told
    assert len(p.requests()) <= 6
    used = told["usage"]
    assert 0 < used["input_tokens"] < 0.05 * BEFORE_INPUT_TOKENS[kind], used
    # the blocker: the denied call and the agent's last words, in the error and the blocker
    assert "curl" in told["error"] and STUCK in told["error"] and "\n" not in told["error"]
    assert told["blocker"]["last_message"] == STUCK
    assert told["blocker"]["denials"], told["blocker"]
    assert all("curl" in d["target"] for d in told["blocker"]["denials"])
    assert told["next_command"] == f"cairn resume {TICKET}"
    # recorded: journal and marker (resumable), and status says why
    (stopped,) = p.events("run_interrupted")
    assert stopped["reason"] == "no_progress" and "curl" in stopped["detail"]
    assert p.marker_path.exists()
    rows = json.loads(p.cairn("status", "--json").stdout)
    (row,) = [r for r in rows if r["ticket"] == TICKET]
    assert row["state"] == "needs_input" and "curl" in row["why"], row
    if kind == "claude-code":  # one session throughout: its cost is the last one it reported
        (last,) = sorted(p.run_dir.glob("*_coder_transcript.jsonl"))[-1:]
        results = [json.loads(x) for x in last.read_text().splitlines() if '"result"' in x]
        assert used["cost_usd"] == pytest.approx(results[-1]["total_cost_usd"], abs=1e-5)
    print(f"{kind}: {told['dispatches']} dispatches, {told['turns']} turns, usage {used}")


# --- a dispatch cut off after a denied call reports it, and what it used -----------------------


@pytest.mark.parametrize("kind", ["claude-code", "codex"])
def test_a_timeout_after_a_denied_call_keeps_the_denial_and_the_usage_seen(
    real: Callable[..., Real], kind: str, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue("claude_bin" if kind == "claude-code" else "codex_bin")
    stalled = {"sleep": 60, "text": "still thinking"}  # the model answers after the timeout
    given = scenario(kind)
    api = "anthropic" if kind == "claude-code" else "openai"
    p = real(kind, {api: [*given[api], stalled]}, no_command=True, agent={"max_seconds": 8})
    if kind == "codex":
        codex_provider_config(p)
    result = p.run()
    no_traceback(result)
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert outcome(result)["reason"] == "timeout"
    (finished,) = p.events("dispatch_finished")
    assert finished["reason"] == "timeout"
    assert [d["tool"] for d in finished["denials"]] == ["Bash" if kind == "claude-code" else "exec"]
    assert "curl" in finished["denials"][0]["target"]
    if kind == "claude-code":  # the first model call's tokens, from the stream; no cost line
        assert finished["usage"]["input_tokens"] > 0 and finished["usage"]["cost_usd"] is None
    else:  # Codex reports usage only at a turn's end: unknown, not 0
        assert "usage" not in finished  # the journal leaves unknown (None) fields out
        assert outcome(result)["usage_unknown"] == 1
        ended = [json.loads(x) for x in result.stdout.splitlines() if '"dispatch_finished"' in x]
        assert ended[0]["usage"] is None
    assert "curl" in json.dumps(outcome(result)["denials"])
