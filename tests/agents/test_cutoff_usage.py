"""A dispatch cut off mid-way (Ctrl+C, a timeout, the turn cap) reports what it used and was
refused, from the stream seen so far: the captured Claude Code and Codex streams, replayed by a
stand-in CLI (a real subprocess) that hangs where the real one was stopped. No usage seen at all
is unknown (None), never 0. And Claude Code's cost of a resumed session is counted once."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from cairn.agents import get
from cairn.agents.base import DispatchRequest
from helpers import FakeCli

FIXTURES = Path(__file__).parent.parent / "fixtures"
CLAUDE_DENIED = FIXTURES / "claude-code-2.1.328" / "permission-denials.stream.jsonl"
CODEX_REFUSED = FIXTURES / "codex-0.169.0" / "sandbox-refused.exec.jsonl"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cut_off(kind: str, tmp_path: Path, env: dict[str, str]) -> Any:
    """Start a dispatch and interrupt it as Ctrl+C would, once the stand-in has written its
    lines and hangs where the real CLI was stopped."""
    session = get(kind).start(
        DispatchRequest(
            role="coder",
            workspace=tmp_path,
            run_dir=tmp_path,
            max_turns=50,
            next_prompt=lambda turn: "go",
            env=env,
        )
    )
    timer = threading.Timer(1.5, session.interrupt, ("interrupted", 0.5))
    timer.start()
    list(session.events())
    timer.cancel()
    assert session.result is not None and session.result.reason == "interrupted"
    return session.result


@pytest.fixture
def fake_claude(tmp_path: Path) -> FakeCli:
    return FakeCli(tmp_path, "claude", "2.1.328 (Claude Code)")


@pytest.fixture
def fake_codex(tmp_path: Path) -> FakeCli:
    return FakeCli(tmp_path, "codex", "codex-cli 0.169.0")


def test_claude_cut_off_after_a_denied_call_reports_the_denial_and_the_tokens(
    tmp_path: Path, fake_claude: FakeCli
) -> None:
    stream = [line for line in lines(CLAUDE_DENIED) if line["type"] != "result"]
    env = fake_claude([{"lines": stream, "hang": True}])
    result = cut_off("claude-code", tmp_path, env)
    assert [(d.tool, d.target) for d in result.denials] == [
        ("Bash", "curl -s http://127.0.0.1:9/x"),
        ("Write", "/home/dev/outside.txt"),
    ]
    messages = {
        m["message"]["id"]: m["message"]["usage"] for m in stream if m["type"] == "assistant"
    }
    assert result.usage is not None
    assert result.usage.input_tokens == sum(u["input_tokens"] for u in messages.values())
    assert result.usage.input_tokens > 0 and result.usage.cost_usd is None  # cost: unknown


def test_claude_cut_off_before_any_usage_is_unknown_not_zero(
    tmp_path: Path, fake_claude: FakeCli
) -> None:
    init = lines(CLAUDE_DENIED)[0]
    env = fake_claude([{"lines": [init], "hang": True}])
    result = cut_off("claude-code", tmp_path, env)
    assert result.usage is None and result.denials == ()


def test_codex_cut_off_mid_turn_reports_the_refusal_and_unknown_usage(
    tmp_path: Path, fake_codex: FakeCli
) -> None:
    stream = [line for line in lines(CODEX_REFUSED) if line["type"] != "turn.completed"]
    env = fake_codex([{"lines": stream, "hang": True}])
    result = cut_off("codex", tmp_path, env)
    assert [(d.tool, d.target) for d in result.denials] == [
        ("exec", "curl -sS -m 5 http://127.0.0.1:9/")
    ]
    assert result.usage is None  # Codex reports usage only at a turn's end


def claude_result(cost: float, tokens: int) -> dict[str, Any]:
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "session_id": "sess-1",
        "num_turns": 1,
        "total_cost_usd": cost,
        "usage": {"input_tokens": tokens, "output_tokens": 1},
    }


def test_claude_cost_of_a_resumed_session_is_counted_once(
    tmp_path: Path, fake_claude: FakeCli
) -> None:
    # Claude Code 2.1.328 reports total_cost_usd from the session's start, also under --resume.
    init = {"type": "system", "subtype": "init", "session_id": "sess-1"}

    def step(n: int, cost: float) -> dict[str, Any]:
        said = {"type": "assistant", "message": {"id": f"m{n}", "content": []}}
        return {"lines": [init, said, claude_result(cost, 100)]}

    env = fake_claude([step(1, 0.04), step(2, 0.06), step(3, 0.09)])
    prompts = iter(["go", "go on", "go on", None])
    session = get("claude-code").start(
        DispatchRequest(
            role="coder",
            workspace=tmp_path,
            run_dir=tmp_path,
            max_turns=9,
            next_prompt=lambda turn: next(prompts),
            env=env,
            session_id="sess-1",
            session_cost_usd=0.01,  # what the session had cost before this dispatch
        )
    )
    list(session.events())
    assert session.result is not None and session.result.usage is not None
    assert session.result.usage.cost_usd == pytest.approx(0.08)  # 0.09 - 0.01, not 0.19
    assert session.result.usage.input_tokens == 300
    assert session.result.session_cost_usd == pytest.approx(0.09)
