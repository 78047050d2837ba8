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
TWO_DISPATCHES: dict[str, Any] = {
    "max_turns": 1,
    "budget_pressure_turns": 0,
    "max_continuations": 1,
}


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
         ["result: error_max_turns after 4 turns, 2 tool calls denied"]),
        ({"type": "result", "subtype": "success", "num_turns": 1, "is_error": True,
          "result": "API Error: 500 overloaded"},
         ["error: API Error: 500 overloaded (result success after 4 turns)"]),
        ({"type": "assistant", "message": {"model": "<synthetic>", "content": [
            {"type": "text", "text": "API Error: 500 overloaded"}]}},
         ["  error: API Error: 500 overloaded"]),
        ({"type": "turn.failed", "error": {"message": "high demand"}},
         ["error: high demand (turn failed)"]),
        ({"type": "turn.started"}, []),
        ({"type": "item.completed", "item": {"type": "command_execution", "command": "ls",
          "exit_code": 0}}, ["  tool exec: ls → exit 0"]),
        ({"type": "item.completed", "item": {"id": "i2", "type": "command_execution",
          "command": "curl x", "exit_code": 7}}, ["  tool exec: curl x → exit 7 (denied)"]),
        ({"type": "user", "message": {"content": [{"type": "tool_result", "is_error": True,
          "tool_use_id": "t1", "content": "This command requires approval"}]}}, []),
        ({"type": "mystery", "x": 1}, ['mystery: {"type": "mystery", "x": 1}']),
    ],
)  # fmt: skip
def test_claude_and_codex_events_read_as_lines(record: dict[str, Any], lines: list[str]) -> None:
    found = transcript_lines.describe(record, denied={"i2", "t1"}, turns=4)
    assert [line.text for line in found] == lines


def test_logs_without_a_ticket_takes_the_branchs_last_one_as_catchup_does(finished: Path) -> None:
    result = cairn("logs", cwd=finished)
    assert result.returncode == 0, result.stderr
    assert result.stdout == cairn("logs", TICKET, cwd=finished).stdout
    caught = cairn("catchup", cwd=finished)
    note = "branch main has no run of ticket main; using ticket T-1, run from it"
    assert note in result.stderr and note in caught.stdout


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def logs_of(repo: Path, fixture: str) -> list[str]:
    """``cairn logs`` of a real agent's captured stream, kept as the run's dispatch 9."""
    text = (FIXTURES / fixture).read_text()
    (run_dir(repo) / "09_coder_transcript.jsonl").write_text(text)
    result = cairn("logs", TICKET, "--dispatch", "9", cwd=repo)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[1:]


def test_logs_count_turns_as_cairn_does_not_as_the_agent_does(finished: Path) -> None:
    # Claude Code says num_turns 4 for its cap of 3; cairn counts the 3 model calls.
    lines = logs_of(finished, "claude-code-2.1.328/max-turns.stream.jsonl")
    assert [line for line in lines if line.startswith("turn")] == ["turn 1", "turn 2", "turn 3"]
    assert lines[-1] == "result: error_max_turns after 3 turns"
    # Codex's one `turn` of codex exec is five steps, cairn's turns.
    lines = logs_of(finished, "codex-0.169.0/sandbox-refused.exec.jsonl")
    assert [line for line in lines if line.startswith("turn")] == [f"turn {n}" for n in range(1, 6)]


def test_logs_mark_denied_calls_and_label_errors(finished: Path) -> None:
    lines = logs_of(finished, "claude-code-2.1.328/permission-denials.stream.jsonl")
    assert "  tool Bash: curl -s http://127.0.0.1:9/x (denied)" in lines
    assert "  tool Write: /home/dev/outside.txt (denied)" in lines
    assert not [line for line in lines if "tool error" in line], lines
    assert lines[-1] == "result: success after 7 turns, 2 tool calls denied"
    lines = logs_of(finished, "codex-0.169.0/sandbox-refused.exec.jsonl")
    curl = "  tool exec: /bin/bash -c 'curl -sS -m 5 http://127.0.0.1:9/' → exit 7 (denied)"
    assert curl in lines
    assert [line for line in lines if "(denied)" in line] == [curl]
    lines = logs_of(finished, "codex-0.169.0/turn-failed.exec.jsonl")
    assert any(line.startswith("error: ") for line in lines), lines


@pytest.mark.parametrize(
    ("fixture", "denied"),
    [
        ("claude-code-2.1.328/permission-denials.stream.jsonl", {"Bash", "Write"}),
        ("codex-0.169.0/sandbox-refused.exec.jsonl", {"exec"}),
    ],
)
def test_the_line_reader_says_what_each_line_is(fixture: str, denied: set[str]) -> None:
    """The dashboard's transcript lines are ``cairn logs``'s, each with its kind, its tool and
    whether cairn counted it denied (one reader for both)."""
    from cairn.agents.replay import LineReader

    reader = LineReader()
    lines = [
        line for raw in (FIXTURES / fixture).read_text().splitlines() for line in reader.feed(raw)
    ]
    refused = [line for line in lines if line.denied]
    assert refused and {line.tool for line in refused} == denied
    assert all(line.kind == "tool" and "(denied)" in line.text for line in refused)
    assert all(("(denied)" in line.text) == line.denied for line in lines if line.kind == "tool")
    assert next(line.text for line in lines if line.kind == "turn") == "turn 1"
    assert all(line.tool is None for line in lines if line.kind != "tool")
