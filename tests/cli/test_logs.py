"""``cairn logs``: a run's transcripts, readable or as JSON lines, one dispatch or all, and
``--follow`` on a live run; the real CLI in subprocesses with the scripted agent."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.state import transcript_lines
from helpers import assert_one_line_error, cairn, scripted_project

TICKET = "T-1"


def say(text: str) -> dict[str, Any]:
    return {"say": text}


def done(n: int) -> dict[str, Any]:
    return {"cairn": ["task", "done", str(n)]}


# Two dispatches: turn 1 hits the one-turn cap, a continuation finishes the plan.
DENIED = {"deny": {"tool": "Bash", "target": "curl x"}}
SCRIPT: dict[str, Any] = {
    "coder": [
        [say("first"), {"write": {"path": "a.txt", "content": "a\n"}}, {"run": "git status"}],
        [say("second " + "y" * 300), DENIED, done(1), done(2)],
    ]
}
TWO_DISPATCHES = {"max_turns": 1, "budget_pressure_turns": 0, "max_continuations": 1}


def run_dir(repo: Path) -> Path:
    base = repo / ".git/cairn/tickets" / TICKET
    (found,) = [p for p in base.iterdir() if p.is_dir()] if base.is_dir() else [None]
    assert found is not None
    return found


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    repo, plan = scripted_project(tmp_path, SCRIPT, **TWO_DISPATCHES)
    result = cairn("run", str(plan), cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
    return repo


def test_logs_prints_every_transcript_readably(finished: Path) -> None:
    result = cairn("logs", TICKET, cwd=finished)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "== dispatch 1 · coder · 01_coder_transcript.jsonl =="
    assert "turn 1" in lines and "  says: first" in lines
    assert "  tool write: a.txt" in lines and "  changed a.txt" in lines
    assert "  tool run: git status" in lines
    assert "== dispatch 2 · coder · 02_coder_transcript.jsonl ==" in lines
    second = next(line for line in lines if line.startswith("  says: second"))
    assert len(second) == len("  says: ") + transcript_lines.MESSAGE_LIMIT
    assert second.endswith("…")
    assert "  tool Bash: curl x (denied)" in lines
    assert "  tool cairn: task done 1" in lines


def test_logs_dispatch_and_json(finished: Path) -> None:
    result = cairn("logs", TICKET, "--dispatch", "2", "--json", cwd=finished)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    raw = (run_dir(finished) / "02_coder_transcript.jsonl").read_text().splitlines()
    assert events == [json.loads(line) for line in raw]
    assert events[0] == {"type": "turn_started", "turn": 1}
    only = cairn("logs", TICKET, "--dispatch", "1", cwd=finished).stdout
    assert "dispatch 1" in only and "dispatch 2" not in only


def test_logs_through_typer_prints_the_same(finished: Path) -> None:
    fast = cairn("logs", TICKET, cwd=finished)
    typer = cairn("logs", TICKET, cwd=finished, env={"CAIRN_FAST": "0"})
    assert (typer.returncode, typer.stdout, typer.stderr) == (0, fast.stdout, fast.stderr)


def test_logs_bad_input(finished: Path, tmp_path: Path) -> None:
    missing = cairn("logs", TICKET, "--dispatch", "7", cwd=finished)
    assert_one_line_error(missing)
    assert "no transcript of dispatch 7 (it has: 1, 2)" in missing.stderr
    assert_one_line_error(cairn("logs", "NOPE-1", cwd=finished))
    assert "has no run" in cairn("logs", "NOPE-1", cwd=finished).stderr
    assert_one_line_error(cairn("logs", "bad id!", cwd=finished))


def test_follow_tails_a_live_run_across_dispatches_until_it_ends(tmp_path: Path) -> None:
    script = {
        "coder": [
            [say("first"), {"sleep": 2.5}, say("after the sleep")],
            [say("second"), done(1), done(2)],
        ]
    }
    repo, plan = scripted_project(tmp_path, script, **TWO_DISPATCHES)
    command = [sys.executable, "-m", "cairn"]
    run = subprocess.Popen(
        [*command, "run", str(plan)], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    follow = None
    try:
        deadline = time.monotonic() + 20
        transcript = None
        while time.monotonic() < deadline:
            found = list((repo / ".git/cairn/tickets").glob("*/*/01_coder_transcript.jsonl"))
            if found and "first" in found[0].read_text():
                transcript = found[0]
                break
            time.sleep(0.05)
        assert transcript is not None, "the first dispatch never wrote its transcript"
        follow = subprocess.Popen(
            [*command, "logs", TICKET, "--follow"],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert run.wait(30) == 0, run.communicate()
        out, err = follow.communicate(timeout=15)
    finally:
        for proc in (run, follow):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
    lines = out.decode().splitlines()
    assert follow.returncode == 0, err
    assert lines[0] == "== dispatch 1 · coder · 01_coder_transcript.jsonl =="
    assert lines.index("  says: first") < lines.index("  says: after the sleep")
    assert "== dispatch 2 · coder · 02_coder_transcript.jsonl ==" in lines
    assert lines.index("== dispatch 2 · coder · 02_coder_transcript.jsonl ==") < lines.index(
        "  says: second"
    )
    assert lines[-1] == "turn 1 done"


def test_follow_on_an_ended_run_prints_the_latest_transcript(finished: Path) -> None:
    result = cairn("logs", TICKET, "-f", cwd=finished)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "== dispatch 2 · coder · 02_coder_transcript.jsonl =="


@pytest.mark.parametrize(
    ("record", "lines"),
    [
        ({"type": "assistant", "message": {"content": [
            {"type": "text", "text": "Working."},
            {"type": "tool_use", "name": "Bash", "input": {"command": "git commit -m x"}},
        ]}}, ["  says: Working.", "  tool Bash: git commit -m x"]),
        ({"type": "system", "subtype": "init", "model": "m"}, ["session started (m)"]),
        ({"type": "result", "subtype": "error_max_turns", "num_turns": 5,
          "permission_denials": [{}, {}]},
         ["result: error_max_turns after 5 turns, 2 tool calls denied"]),
        ({"type": "turn.failed", "error": {"message": "high demand"}},
         ["turn failed: high demand"]),
        ({"type": "item.completed", "item": {"type": "command_execution", "command": "ls",
          "exit_code": 0}}, ["  tool exec: ls → exit 0"]),
        ({"type": "mystery", "x": 1}, ['mystery: {"type": "mystery", "x": 1}']),
    ],
)  # fmt: skip
def test_claude_and_codex_events_read_as_lines(record: dict[str, Any], lines: list[str]) -> None:
    assert transcript_lines.describe(record) == lines
