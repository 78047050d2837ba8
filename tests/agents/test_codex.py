"""The codex adapter against the captured stream and a stand-in ``codex`` program (a real
subprocess replaying ``exec --json`` lines): cairn's own turn cap, resume, failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.agents import get
from cairn.agents.base import Dispatch, DispatchRequest, Event
from cairn.agents.codex import CodexAdapter, ExecState
from cairn.errors import BadInput
from helpers import FakeCli, play_dispatch, result_of

CAPTURED = Path(__file__).parent.parent / "fixtures" / "codex-0.169.0" / "turn-failed.exec.jsonl"

THREAD = {"type": "thread.started", "thread_id": "thr-1"}
TURN = {"type": "turn.started"}
DONE = {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 5}}


def command(n: int) -> dict:
    return {
        "type": "item.completed",
        "item": {
            "id": f"i{n}",
            "type": "command_execution",
            "command": f"step {n}",
            "exit_code": 0,
            "status": "completed",
        },
    }


def change(path: str) -> dict:
    return {
        "type": "item.completed",
        "item": {"id": "c", "type": "file_change", "changes": [{"path": path, "kind": "add"}]},
    }


def message(text: str) -> dict:
    return {"type": "item.completed", "item": {"id": "m", "type": "agent_message", "text": text}}


TODO = {
    "type": "item.updated",
    "item": {
        "id": "t",
        "type": "todo_list",
        "items": [{"text": "Task 1", "completed": True}, {"text": "Task 2", "completed": False}],
    },
}


@pytest.fixture
def fake_codex(tmp_path: Path) -> FakeCli:
    return FakeCli(tmp_path, "codex", "codex-cli 0.169.0")


def dispatch(
    tmp_path: Path, env: dict[str, str], prompts: list[str | None], max_turns: int = 10
) -> tuple[Dispatch, list[Event], list[int]]:
    return play_dispatch("codex", tmp_path, env, prompts, max_turns)


def test_captured_failure_stream() -> None:
    state = ExecState()
    for line in CAPTURED.read_text().splitlines():
        state.feed(line)
    assert state.session_id == "01a2299c-8def-7973-82c8-23416684b994"
    assert state.failure is not None and "high demand" in state.failure
    assert not state.completed and state.turns == 0


def test_steps_are_turns_and_todo_list_is_a_plan(tmp_path: Path, fake_codex: FakeCli) -> None:
    env = fake_codex(
        [{"lines": [THREAD, TURN, TODO, command(1), change("a.py"), message("done"), DONE]}]
    )
    session, events, _ = dispatch(tmp_path, env, ["do it", None])
    assert result_of(session).reason == "completed"
    assert result_of(session).num_turns == 3
    assert result_of(session).final_message == "done"
    assert result_of(session).session_id == "thr-1"
    assert [e.turn for e in events if e.kind == "turn_completed"] == [1, 2, 3]
    (plan,) = [e for e in events if e.kind == "plan_updated"]
    assert plan.data["items"][0] == {"text": "Task 1", "completed": True}
    assert [e.data["path"] for e in events if e.kind == "file_changed"] == ["a.py"]
    (argv,) = fake_codex.calls()
    assert argv == ["exec", "--json", "--skip-git-repo-check", "do it"]


def test_cairn_enforces_the_turn_cap(tmp_path: Path, fake_codex: FakeCli) -> None:
    lines = [THREAD, TURN, *[command(n) for n in range(1, 10)]]
    env = fake_codex([{"lines": lines, "pause": 0.05, "hang": True}])
    session, _events, _ = dispatch(tmp_path, env, ["go", "go"], max_turns=3)
    assert result_of(session).reason == "max_turns"
    assert 3 <= result_of(session).num_turns < 9


def test_work_left_resumes_the_thread(tmp_path: Path, fake_codex: FakeCli) -> None:
    env = fake_codex(
        [
            {"lines": [THREAD, TURN, command(1), DONE]},
            {"lines": [THREAD, TURN, command(2), message("all done"), DONE]},
        ]
    )
    session, _, asked = dispatch(tmp_path, env, ["first", "continue", None])
    assert result_of(session).reason == "completed"
    assert result_of(session).num_turns == 3
    first, second = fake_codex.calls()
    assert "resume" not in first
    assert second[-3:] == ["resume", "thr-1", "continue"]
    assert asked == [1, 2, 4]


@pytest.mark.parametrize(
    ("step", "reason", "needle"),
    [
        ({"lines": CAPTURED.read_text().splitlines(), "exit": 1}, "error", "high demand"),
        ({"lines": [THREAD, TURN, command(1)], "exit": 0}, "error", "mid-turn"),
        ({"lines": [THREAD, "garbage{", TURN, command(1)], "exit": 2}, "error", "malformed"),
        ({"lines": [THREAD, TURN, DONE]}, "error", "without a single step"),
    ],
)
def test_failures_are_clear_reasons(
    tmp_path: Path, fake_codex: FakeCli, step: dict[str, Any], reason: str, needle: str
) -> None:
    session, _, _ = dispatch(tmp_path, fake_codex([step]), ["go", "go"])
    assert result_of(session).reason == reason
    assert needle in (result_of(session).detail or "")


def test_command_and_preflight(tmp_path: Path) -> None:
    program = CodexAdapter().program
    assert program(None) == ["codex", "exec"]
    assert program("codex --full-auto") == ["codex", "exec", "--full-auto"]
    assert program(["codex", "exec", "-m", "x"]) == ["codex", "exec", "-m", "x"]
    request = DispatchRequest(
        role="coder",
        workspace=tmp_path,
        run_dir=tmp_path,
        max_turns=2,
        next_prompt=lambda turn: "go",
        env={"PATH": str(tmp_path)},
    )
    with pytest.raises(BadInput, match="npm install -g @openai/codex"):
        get("codex").preflight(request)
