"""The budget hook counts the turn that made the tool call even when Claude Code has not yet
written it to the transcript: it waits for the message that names the call."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from cairn.integrations import claude_hooks
from cairn.integrations.claude_hooks import post_tool_use
from cairn.terms import ENV_MAX_TURNS, ENV_PRESSURE_TURNS


def assistant(message_id: str, tool_use_id: str | None = None) -> str:
    content = [{"type": "tool_use", "id": tool_use_id, "name": "Write"}] if tool_use_id else []
    line = {"type": "assistant", "message": {"id": message_id, "content": content}}
    return json.dumps(line) + "\n"


def test_waits_for_the_message_that_made_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(claude_hooks, "TRANSCRIPT_WAIT", 60.0)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(assistant("m1", "toolu_1"))
    env = {ENV_MAX_TURNS: "3", ENV_PRESSURE_TURNS: "1"}
    payload = {"cwd": str(tmp_path), "transcript_path": str(transcript), "tool_use_id": "toolu_2"}

    def late_write() -> None:
        time.sleep(0.3)
        with transcript.open("a") as handle:
            handle.write(assistant("m2", "toolu_2"))

    writer = threading.Thread(target=late_write)
    writer.start()
    reply = post_tool_use(payload, env)
    writer.join()
    assert reply is not None  # turn 2 of 3 counted: 1 left, the directive is sent
    assert "1 turn(s) left" in reply["hookSpecificOutput"]["additionalContext"]


def test_does_not_wait_for_a_transcript_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_waiting(seconds: float) -> None:
        raise AssertionError("the hook waited")

    monkeypatch.setattr(time, "sleep", no_waiting)
    env = {ENV_MAX_TURNS: "3", ENV_PRESSURE_TURNS: "1"}
    payload = {"transcript_path": str(tmp_path / "none.jsonl"), "tool_use_id": "toolu_9"}
    assert post_tool_use(payload, env) is None
