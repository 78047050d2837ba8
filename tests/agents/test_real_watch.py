"""What ``cairn run`` shows of the real CLIs' work (issue 22): a line per tool call and per
message, ``denied`` for a call the permission preset refused, the agent's session id with the
command that continues it by hand, all cut to the terminal's width. Claude Code 2.1.328 and
Codex 0.169.0 against cairn's scripted model server; same harness and skip rules as
``real_agents.py`` and ``conftest.py``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents.real_agents import (
    Real,
    bash_tool,
    codex_provider_config,
    exec_tool,
    no_traceback,
    write_tool,
)

pytestmark = pytest.mark.slow

COLUMNS = 70


def shown(p: Real) -> list[str]:
    """``cairn run`` on a terminal COLUMNS wide (plain lines: stdout is a pipe)."""
    result = p.cairn("run", str(p.plan), env={"COLUMNS": str(COLUMNS)})
    no_traceback(result)
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout.splitlines()


def session_id(p: Real) -> str:
    events = [json.loads(line) for line in (p.run_dir / "run-log.jsonl").read_text().splitlines()]
    (finished,) = [e for e in events if e["event"] == "dispatch_finished"]
    return str(finished["session_id"])


def test_claude_code_run_shows_its_calls_messages_denials_and_session(
    real: Callable[..., Real], claude_bin: Path
) -> None:
    def scenario(repo: Path) -> dict[str, Any]:
        return {
            "anthropic": [
                {"text": "I'll create a.txt first.", "tool": write_tool(repo / "a.txt", "one\n")},
                {"tool": bash_tool("curl -s http://127.0.0.1:9/" + "x" * 100)},  # denied
                {"tool": bash_tool("cairn task done 1 --files a.txt --outcome written")},
                {"text": "Task 1 is done."},
            ]
        }

    p = real("claude-code", scenario, no_command=True, tasks=("One",), max_turns=10)
    lines = shown(p)
    ident = session_id(p)
    assert f"  agent session {ident} · continue it by hand: claude --resume {ident}" in lines
    assert "  ▸ I'll create a.txt first." in lines
    assert "  Write  a.txt" in lines
    curl = [line for line in lines if line.startswith("  Bash  curl -s http://127.0.0.1:9/xx")]
    denied = [line for line in lines if line.startswith("  denied  Bash  curl -s http://127.0")]
    assert len(curl) == 1 and len(denied) == 1, lines
    assert all(len(line) == COLUMNS and line.endswith("…") for line in curl + denied), lines
    assert "  Bash  cairn task done 1 --files a.txt --outcome written" in lines
    assert "  ▸ Task 1 is done." in lines
    assert lines.index(curl[0]) < lines.index(denied[0]) < lines.index("  ▸ Task 1 is done.")


def test_codex_run_shows_its_steps_messages_denials_and_session(
    real: Callable[..., Real], codex_bin: Path
) -> None:
    scenario = {
        "openai": [
            {"tool": exec_tool("printf 'one\\n' > a.txt")},
            {"tool": exec_tool("curl -sS -m 5 http://127.0.0.1:9/")},  # no network: denied
            {"tool": exec_tool("cairn task done 1 --files a.txt --outcome written")},
            {"text": "Task 1 is done."},
        ]
    }
    p = real("codex", scenario, no_command=True, tasks=("One",), max_turns=10)
    codex_provider_config(p)
    lines = shown(p)
    ident = session_id(p)
    assert f"  agent session {ident} · continue it by hand: codex resume {ident}" in lines
    assert "  exec  printf 'one\\n' > a.txt" in lines
    assert "  exec  curl -sS -m 5 http://127.0.0.1:9/" in lines
    denied = "  denied  exec  curl -sS -m 5 http://127.0.0.1:9/ — Couldn't connect"
    assert any(line.startswith(denied) and len(line) <= COLUMNS for line in lines), lines
    assert "  exec  cairn task done 1 --files a.txt --outcome written" in lines
    assert "  ▸ Task 1 is done." in lines
    # The hint is Codex's: its sandbox's keys, not agent.allow (which does not apply to it).
    (hint,) = [line for line in lines if line.startswith("  agent was denied")]
    assert "network_access=true" in hint and "allow them with agent.allow" not in hint, hint
    caught = p.cairn("catchup").stdout
    assert "network_access=true" in caught and "allow them with agent.allow" not in caught
    summary = next(p.run_dir.glob("*change-summary*.md")).read_text()
    assert "network_access=true" in summary and "allow them with agent.allow" not in summary
