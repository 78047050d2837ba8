"""``cairn run`` shows what the agent does (issue 22): a line per tool call and per message,
cut to the terminal's width, ``denied`` for a refused call; ``--quiet`` keeps only cairn's own
lines; ``--json`` has them as ``tool``, ``tool_denied`` and ``message`` events. The scripted
agent in real subprocesses; the real CLIs are in tests/agents/test_real_watch.py."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest

from helpers import cairn
from run.run_setup import TICKET, Project, code, done

SCRIPT = {
    "coder": [
        [
            {"say": "I'll create the file one.txt now.\nThen I report it."},
            {"write": {"path": "one.txt", "content": "one\n"}},
            {"run": "ls -la " + "x" * 200 + " || true"},
            done(1, "one.txt"),
        ],
        [{"deny": {"tool": "Bash", "target": "curl https://example.com"}}, done(2)],
    ]
}


def run_plain(p: Project, *args: str, columns: int = 60) -> list[str]:
    result = cairn("run", str(p.plan), *args, cwd=p.repo, env={"COLUMNS": str(columns)})
    assert code(result) == 0, result.stderr
    return result.stdout.splitlines()


def test_run_shows_each_tool_call_and_message_cut_to_the_width(
    project: Callable[..., Project],
) -> None:
    p = project(SCRIPT)
    lines = run_plain(p, columns=60)
    assert "  ▸ I'll create the file one.txt now. Then I report it." in lines
    assert "  write  one.txt" in lines
    ls = next(line for line in lines if line.startswith("  run  ls -la xxx"))
    assert len(ls) == 60 and ls.endswith("…"), ls
    assert "  cairn  task done 1 --files one.txt --outcome works" in lines
    assert "  denied  Bash  curl https://example.com" in lines
    agents = [line for line in lines if line.startswith(("  ▸", "  write", "  run", "  cairn"))]
    assert len(agents) == 5 and all(len(line) <= 60 for line in agents), agents
    # cairn's own lines are still there, in order around the agent's
    at = lines.index("  write  one.txt")
    assert lines[at + 3] == "  turn 1/3"


def test_quiet_keeps_only_cairns_own_lines(project: Callable[..., Project]) -> None:
    p = project(SCRIPT)
    lines = run_plain(p, "--quiet")
    assert not [line for line in lines if "▸" in line or "write  one.txt" in line]
    assert not [line for line in lines if "denied  Bash" in line]
    assert "  turn 1/3" in lines and "  turn 2/3" in lines


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith('{"event"')]


def test_json_has_tool_and_message_events(project: Callable[..., Project]) -> None:
    p = project(SCRIPT)
    result = cairn("run", str(p.plan), "--json", cwd=p.repo)
    assert code(result) == 0, result.stderr
    found = events(result.stdout)
    (said,) = [e for e in found if e["event"] == "message"]
    assert said == {
        "event": "message",
        "dispatch": 1,
        "turn": 1,
        "text": "I'll create the file one.txt now.\nThen I report it.",
    }
    tools = [(e["tool"], e["target"]) for e in found if e["event"] == "tool"]
    assert tools[0] == ("write", "one.txt") and ("Bash", "curl https://example.com") in tools
    (denied,) = [e for e in found if e["event"] == "tool_denied"]
    assert denied["tool"] == "Bash" and denied["target"] == "curl https://example.com"
    assert denied["turn"] == 2
    quiet = cairn("resume", TICKET, "--json", "--quiet", cwd=p.repo)
    assert not [e for e in events(quiet.stdout) if e["event"] in ("tool", "message")]


@pytest.mark.parametrize("columns", [40, 120])
def test_the_display_cuts_to_columns(
    columns: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cairn.cli.display import Display

    monkeypatch.setitem(os.environ, "COLUMNS", str(columns))
    shown = Display("plain")
    shown.event("tool", dispatch=1, turn=1, tool="Bash", target="echo " + "y" * 300)
    shown.event("message", dispatch=1, turn=1, text="a\n\nb " + "z" * 300)
    shown.event("session", dispatch=1, role="coder", session_id="s" * 60, resume="x --r")
    tool, message, session = capsys.readouterr().out.splitlines()
    assert len(tool) == columns and tool.startswith("  Bash  echo yyy") and tool[-1] == "…"
    assert len(message) == columns and message.startswith("  ▸ a b zzz")
    assert session == f"  agent session {'s' * 60} · continue it by hand: x --r"


def test_a_one_task_run_says_1_task(capsys: pytest.CaptureFixture[str]) -> None:
    from cairn.cli.display import Display

    Display("plain").event("run_started", run="R", ticket="T-1", tasks=1, agent="codex")
    assert capsys.readouterr().out == "run R of ticket T-1: 1 task, agent codex\n"


# --- the change summary says where the run is and what it changed (issue 22) -------------------

SEEN = "status-seen.txt"
LOOK = {"run": f"sed -n '/^## Status/,+1p' \"$CAIRN_RUN_DIR\"/*change-summary.md > {SEEN}"}


@pytest.mark.parametrize("how", ["continuation", "resume"])
def test_a_handoff_dispatch_sees_the_run_in_progress_not_the_old_cutoff(
    project: Callable[..., Project], how: str
) -> None:
    script = {"coder": [[{"cairn": ["task", "start", "1"]}], [LOOK, done(1), done(2)]]}
    more = 1 if how == "continuation" else 0
    p = project(script, max_turns=1, budget_pressure_turns=0, max_continuations=more)
    first = p.run()
    if how == "resume":
        assert code(first) == 3, first.stderr
        assert "Interrupted — max_turns during task 1 of 2" in p.summary_text()
        first = p.resume()
    assert code(first) == 0, first.stderr
    assert (p.repo / SEEN).read_text() == "## Status\nIn progress — task 1 of 2\n"


def test_files_changed_lists_the_branch_and_the_snapshot_not_pending(
    project: Callable[..., Project],
) -> None:
    script = {
        "coder": [
            [
                {"write": {"path": "a.txt", "content": "a\n"}},
                {"run": "git add a.txt && git commit -qm a"},
                done(1),  # no files reported: git says what changed
            ],
            [{"write": {"path": "notes/b.txt", "content": "half\n"}}],
        ]
    }
    p = project(script, max_turns=2, budget_pressure_turns=0)
    assert code(p.run()) == 3
    text = p.summary_text()
    assert "## Files changed\n- `a.txt`\n- `notes/b.txt`\n" in text, text
    assert p.summary().files_changed == ["a.txt", "notes/b.txt"]
