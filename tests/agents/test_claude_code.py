"""The claude-code adapter against the captured stream, and against a stand-in ``claude`` program
(a real subprocess replaying stream-json) for exit codes, continuation and interrupts.
The real CLI is exercised end to end by the model-server tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.agents import get
from cairn.agents.base import Dispatch, DispatchRequest, Event
from cairn.agents.claude_code import StreamState, hook_settings
from cairn.errors import BadInput
from cairn.integrations.claude_hooks import count_turns, post_tool_use
from cairn.terms import ENV_DISPATCH_ID, ENV_MAX_TURNS, ENV_PRESSURE_TURNS, ENV_RUN_DIR
from helpers import FakeCli, play_dispatch, result_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "claude-code-2.1.328"
CAPTURED = FIXTURES / "max-turns.stream.jsonl"


def assistant(ident: str, *blocks: dict) -> dict:
    return {"type": "assistant", "message": {"id": ident, "content": list(blocks)}}


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def write(path: str) -> dict:
    return {"type": "tool_use", "name": "Write", "input": {"file_path": path, "content": "x"}}


INIT = {"type": "system", "subtype": "init", "session_id": "sess-1"}


def result(subtype: str = "success", **extra: object) -> dict:
    return {
        "type": "result",
        "subtype": subtype,
        "is_error": subtype != "success",
        "session_id": "sess-1",
        "num_turns": 1,
        **extra,
    }


@pytest.fixture
def fake_claude(tmp_path: Path) -> FakeCli:
    return FakeCli(tmp_path, "claude", "2.1.328 (Claude Code)")


def dispatch(
    tmp_path: Path, env: dict[str, str], prompts: list[str | None], max_turns: int = 5
) -> tuple[Dispatch, list[Event], list[int]]:
    return play_dispatch("claude-code", tmp_path, env, prompts, max_turns, pressure_turns=2)


def test_captured_stream_is_three_turns_cut_at_the_cap() -> None:
    state = StreamState()
    events = [e for line in CAPTURED.read_text().splitlines() for e in state.feed(line)]
    assert state.turns == 3
    assert state.session_id == "6a71b482-fb2e-43d1-bc85-5e0c27dc37e3"
    assert state.result is not None and state.result["subtype"] == "error_max_turns"
    assert [e.turn for e in events if e.kind == "turn_completed"] == [1, 2, 3]
    assert [e.data["name"] for e in events if e.kind == "tool_use"] == ["Write"] * 3
    assert len([e for e in events if e.kind == "file_changed"]) == 3


def test_turn_cap_is_max_turns(tmp_path: Path, fake_claude: FakeCli) -> None:
    lines = CAPTURED.read_text().splitlines()
    env = fake_claude([{"lines": lines, "exit": 1}])
    session, _events, _ = dispatch(tmp_path, env, ["do the plan", "go on"], max_turns=3)
    assert result_of(session).reason == "max_turns"
    assert result_of(session).num_turns == 3
    assert result_of(session).session_id == "6a71b482-fb2e-43d1-bc85-5e0c27dc37e3"
    (argv,) = fake_claude.calls()
    assert argv[:2] == ["-p", "do the plan"]
    assert argv[argv.index("--max-turns") + 1] == "3"
    assert "--verbose" in argv and argv[argv.index("--output-format") + 1] == "stream-json"
    settings = json.loads(argv[argv.index("--settings") + 1])
    assert "post-tool-use" in settings["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
    assert "--resume" not in argv


def test_finished_with_work_left_resumes_the_session(tmp_path: Path, fake_claude: FakeCli) -> None:
    env = fake_claude(
        [
            {"lines": [INIT, assistant("m1", text("did task 1")), result()]},
            {"lines": [INIT, assistant("m2", text("did task 2")), result(result="all done")]},
        ]
    )
    session, events, asked = dispatch(tmp_path, env, ["first", "continue please", None])
    assert result_of(session).reason == "completed"
    assert result_of(session).num_turns == 2
    assert result_of(session).final_message == "all done"
    first, second = fake_claude.calls()
    assert "--resume" not in first
    assert second[:2] == ["-p", "continue please"]
    assert second[second.index("--resume") + 1] == "sess-1"
    assert second[second.index("--max-turns") + 1] == "4"
    assert asked == [1, 2, 3]
    assert [e.turn for e in events if e.kind == "turn_completed"] == [1, 2]


@pytest.mark.parametrize(
    ("step", "reason", "needle"),
    [
        ({"lines": [INIT, assistant("m1", text("hi"))], "exit": 0}, "error", "no result line"),
        (
            {"lines": [INIT, "{not json", assistant("m1", text("hi"))], "exit": 3},
            "error",
            "malformed",
        ),
        ({"lines": [INIT, assistant("m1", text("hi"))], "kill": True}, "crashed", "SIGKILL"),
        (
            {"lines": [INIT, result("error_during_execution", errors=["boom"])], "exit": 1},
            "error",
            "boom",
        ),
        (
            {"lines": [INIT, result("success", is_error=True, result="API error 500")], "exit": 1},
            "error",
            "API error",
        ),
    ],
)
def test_agent_side_failures_are_clear_reasons(
    tmp_path: Path,
    fake_claude: FakeCli,
    step: dict[str, Any],
    reason: str,
    needle: str,
) -> None:
    session, _, _ = dispatch(tmp_path, fake_claude([step]), ["go", "go"])
    assert result_of(session).reason == reason
    assert needle in (result_of(session).detail or "")


def test_interrupt_stops_the_process_group(tmp_path: Path, fake_claude: FakeCli) -> None:
    env = fake_claude([{"lines": [INIT, assistant("m1", text("working"))], "hang": True}])
    request = DispatchRequest(
        role="coder",
        workspace=tmp_path,
        run_dir=tmp_path,
        max_turns=5,
        next_prompt=lambda turn: "go",
        env=env,
    )
    session = get("claude-code").start(request)
    events = session.events()
    assert next(events).kind == "turn_started"
    began = time.monotonic()
    session.interrupt("timeout", 0.5)
    assert time.monotonic() - began < 0.1
    list(events)
    assert result_of(session).reason == "timeout"
    assert time.monotonic() - began < 5


def test_missing_program_is_bad_input(tmp_path: Path) -> None:
    request = DispatchRequest(
        role="coder",
        workspace=tmp_path,
        run_dir=tmp_path,
        max_turns=5,
        next_prompt=lambda turn: "go",
        env={"PATH": str(tmp_path)},
    )
    with pytest.raises(BadInput, match="npm install -g @anthropic-ai/claude-code"):
        get("claude-code").preflight(request)


def transcript(path: Path, turns: int) -> Path:
    lines: list[dict[str, Any]] = [{"type": "user", "message": {"content": "go"}}]
    for n in range(turns):
        lines += [
            {"type": "assistant", "message": {"id": f"m{n}", "content": [text("a")]}},
            {"type": "assistant", "message": {"id": f"m{n}", "content": [write("f")]}},
            {"type": "assistant", "isSidechain": True, "message": {"id": f"s{n}"}},
        ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def test_hook_counts_turns_and_sends_the_directive_late(tmp_path: Path) -> None:
    env = {ENV_MAX_TURNS: "10", ENV_PRESSURE_TURNS: "2"}
    assert count_turns(transcript(tmp_path / "t.jsonl", 4)) == 4
    for turns, expected in ((7, False), (8, True), (9, True)):
        payload = {
            "cwd": str(tmp_path),
            "transcript_path": str(transcript(tmp_path / "t.jsonl", turns)),
        }
        reply = post_tool_use(payload, env)
        assert (reply is not None) == expected, turns
        if reply is not None:
            context = reply["hookSpecificOutput"]["additionalContext"]
            assert reply["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
            assert context.startswith(f"BUDGET: {10 - turns} turn(s) left")
    assert post_tool_use({"transcript_path": str(tmp_path / "t.jsonl")}, {}) is None
    assert post_tool_use({"transcript_path": str(tmp_path / "none.jsonl")}, env) is None


def test_hook_command_never_breaks_the_agent(tmp_path: Path) -> None:
    payload = {"cwd": str(tmp_path), "transcript_path": str(transcript(tmp_path / "t.jsonl", 9))}
    env = {**os.environ, ENV_MAX_TURNS: "10", ENV_PRESSURE_TURNS: "2"}
    cmd = [sys.executable, "-m", "cairn", "hook", "claude", "post-tool-use"]
    answered = subprocess.run(
        cmd, input=json.dumps(payload).encode(), env=env, capture_output=True, check=False
    )
    assert answered.returncode == 0
    assert (
        "BUDGET: 1 turn(s) left"
        in json.loads(answered.stdout)["hookSpecificOutput"]["additionalContext"]
    )
    garbage = subprocess.run(cmd, input=b"\x00 not json", env=env, capture_output=True, check=False)
    assert (garbage.returncode, garbage.stdout, garbage.stderr) == (0, b"", b"")
    assert "cairn" in hook_settings()


def test_hook_counts_only_this_dispatchs_turns_of_a_resumed_session(tmp_path: Path) -> None:
    env = {ENV_MAX_TURNS: "3", ENV_PRESSURE_TURNS: "1", ENV_RUN_DIR: str(tmp_path)}
    path = tmp_path / "t.jsonl"

    def reply(turns: int, dispatch: str) -> dict[str, Any] | None:
        payload = {"cwd": str(tmp_path), "transcript_path": str(transcript(path, turns))}
        return post_tool_use(payload, {**env, ENV_DISPATCH_ID: dispatch})

    assert reply(1, "coder-a") is None
    assert reply(2, "coder-a") is not None  # 1 turn left of 3
    # the next dispatch resumes the same session: its first turn is the session's 4th
    assert reply(4, "coder-b") is None
    assert reply(5, "coder-b") is not None
    answer = reply(5, "coder-b")
    assert answer is not None
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("BUDGET: 1 turn(s) left")
    assert sorted(p.name for p in (tmp_path / "claude-hook").iterdir()) == [
        "coder-a.json",
        "coder-b.json",
    ]


def test_a_turn_ends_when_its_tool_results_come_back() -> None:
    state = StreamState()
    lines = [INIT, assistant("m1", write("a")), {"type": "user", "message": {"content": []}}]
    events = [e for line in lines for e in state.feed(json.dumps(line))]
    assert [e.kind for e in events][-1] == "turn_completed"


@pytest.mark.parametrize(
    ("reported", "needle"),
    [("1.0.44 (Claude Code)", "older than 2.1.0"), ("hello", "not a Claude Code version")],
)
def test_wrong_version_is_bad_input(
    tmp_path: Path, fake_claude: FakeCli, reported: str, needle: str
) -> None:
    env = {**fake_claude([{"lines": []}]), "FAKE_VERSION": reported}
    request = DispatchRequest(
        role="coder",
        workspace=tmp_path,
        run_dir=tmp_path,
        max_turns=5,
        next_prompt=lambda turn: "go",
        env=env,
    )
    with pytest.raises(BadInput, match=needle):
        get("claude-code").preflight(request)
