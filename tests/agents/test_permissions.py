"""cairn's permission preset, denials read from real captured output, transcripts, and the
``--version`` probe's timeout."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from cairn.agents import permissions, transcript, versions
from cairn.agents.base import Denial, Result
from cairn.agents.claude_code import StreamState, denials, hook_settings
from cairn.agents.codex import ExecState, shell_command
from cairn.errors import BadInput
from cairn.run.orchestrator.dispatch import transient
from cairn.util.procs import pid_alive

FIXTURES = Path(__file__).parent.parent / "fixtures"


# --- the preset ----------------------------------------------------------------------------------


def test_claude_preset_allows_git_cairn_and_the_check_commands_only() -> None:
    settings = json.loads(hook_settings(permissions.claude_settings("preset", ["npm test"])))
    assert settings["hooks"]["PostToolUse"]  # cairn's budget hook is still there
    assert settings["permissions"]["allow"] == [
        "Bash(git status:*)",
        "Bash(git diff:*)",
        "Bash(git add:*)",
        "Bash(git commit:*)",
        "Bash(git log:*)",
        "Bash(git show:*)",
        "Bash(cairn:*)",
        "mcp__cairn",
        "Bash(npm test:*)",
    ]
    assert "permissions" not in json.loads(hook_settings(permissions.claude_settings("user", [])))
    assert permissions.claude_flags("preset", ["claude"]) == ["--permission-mode", "acceptEdits"]
    assert permissions.claude_flags("user", ["claude"]) == []
    # The user's own mode stands; the preset's rules are still added (rules only allow more).
    for own in (["--permission-mode", "plan"], ["--permission-mode=plan"]):
        assert permissions.claude_flags("preset", ["claude", *own]) == []
    assert permissions.claude_flags("preset", ["claude", "--dangerously-skip-permissions"]) == []


def test_codex_preset_is_workspace_write_and_never_asks() -> None:
    preset = ["-s", "workspace-write", "-c", 'approval_policy="never"']
    assert permissions.codex_options("preset", []) == preset
    assert permissions.codex_options("user", []) == []
    assert permissions.codex_options("preset", ["-s", "read-only"]) == preset[2:]
    assert permissions.codex_options("preset", ["-c", "approval_policy=on-request"]) == preset[:2]
    bypass = "--dangerously-bypass-approvals-and-sandbox"
    assert permissions.codex_options("preset", [bypass]) == []
    assert permissions.codex_sandboxed(preset)
    assert not permissions.codex_sandboxed([bypass])
    assert not permissions.codex_sandboxed(["-s", "danger-full-access"])


def test_allow_entries_must_be_commands(tmp_path: Path) -> None:
    from cairn.config import load

    (tmp_path / "cairn.toml").write_text('[agent]\nallow = ["pytest", "npm test"]\n')
    assert load(tmp_path).agent.allow == ["pytest", "npm test"]
    assert load(tmp_path).agent.permissions == "preset"
    for bad in ('allow = ["Bash(*)"]', 'allow = [""]', 'permissions = "none"'):
        (tmp_path / "cairn.toml").write_text(f"[agent]\n{bad}\n")
        with pytest.raises(BadInput, match="agent"):
            load(tmp_path)


# --- denials from real output --------------------------------------------------------------------


def test_claude_permission_denials_from_the_result_line() -> None:
    state = StreamState()
    for line in (FIXTURES / "claude-code-2.1.328" / "permission-denials.stream.jsonl").open():
        state.feed(line)
    assert state.result is not None
    assert denials(state.result) == [
        Denial("Bash", "curl -s http://127.0.0.1:9/x"),
        Denial("Write", "/home/dev/outside.txt"),
    ]
    long = {"permission_denials": [{"tool_name": "Bash", "tool_input": {"command": "x\n" * 200}}]}
    (one,) = denials(long)
    assert "\n" not in one.target and len(one.target) == 160 and one.target.endswith("…")
    assert denials({"permission_denials": "garbage"}) == []
    assert denials({"permission_denials": [{"tool_input": None}, 3]}) == [Denial("?", "")]


def test_codex_sandbox_refusals_from_the_exec_stream() -> None:
    lines = (FIXTURES / "codex-0.169.0" / "sandbox-refused.exec.jsonl").read_text().splitlines()
    state = ExecState()
    for line in lines:
        state.feed(line)
    assert state.denials == [Denial("exec", "curl -sS -m 5 http://127.0.0.1:9/")]
    # Without a sandbox, a connection refused is just a failed command.
    unsandboxed = ExecState(sandboxed=False)
    for line in lines:
        unsandboxed.feed(line)
    assert unsandboxed.denials == []
    # A refused write, when Codex shows it, is a denial in any mode.
    item = {
        "type": "command_execution",
        "command": "/bin/bash -c \"printf 'x' > /etc/x\"",
        "aggregated_output": "/bin/bash: line 1: /etc/x: Read-only file system\n",
        "exit_code": 1,
        "status": "failed",
    }
    unsandboxed.feed(json.dumps({"type": "item.completed", "item": item}))
    assert unsandboxed.denials == [Denial("exec", "printf 'x' > /etc/x")]
    assert shell_command("/bin/bash -lc 'ls -l'") == "ls -l"
    assert shell_command("plain 'unbalanced") == "plain 'unbalanced"


def test_claude_api_error_note_is_not_a_turn() -> None:
    state = StreamState()
    note = {
        "type": "assistant",
        "message": {
            "id": "n1",
            "model": "<synthetic>",
            "content": [{"type": "text", "text": "API Error: 500 scripted outage."}],
        },
    }
    assert state.feed(json.dumps(note)) == [] and state.turns == 0


@pytest.mark.parametrize(
    ("detail", "turns", "expected"),
    [
        (
            "claude reported an error: API Error: 500 scripted outage. This is a server-side",
            0,
            True,
        ),
        ("We're currently experiencing high demand, which may cause temporary errors.", 0, True),
        ("API Error: Connection error.", 0, True),
        ("Overloaded", 0, True),
        ("claude reported an error: API Error: 500 boom", 2, False),  # work was done
        ("claude reported an error: API Error: 401 invalid x-api-key", 0, False),
        ("claude exit status 1 with no result line", 0, False),
    ],
)
def test_transient_api_errors(detail: str, turns: int, expected: bool) -> None:
    assert transient(Result("error", turns, detail=detail)) is expected
    assert not transient(Result("crashed", 0, detail=detail))


# --- transcripts ---------------------------------------------------------------------------------


def test_transcripts_are_numbered_per_run_and_rotated(tmp_path: Path) -> None:
    first = transcript.claim(tmp_path, "coder")
    second = transcript.claim(tmp_path, "a/b")
    assert (first.name, second.name) == ("01_coder_transcript.jsonl", "02_a_b_transcript.jsonl")
    assert first.read_bytes() == b""
    kept = transcript.Transcript(first, limit=100)
    for n in range(13):
        kept.write(json.dumps({"n": n}))  # 9 bytes a line (10 from n = 10 on)
    kept.close()
    rotated = first.with_name(first.name + ".1")
    assert [json.loads(x)["n"] for x in rotated.read_text().splitlines()] == list(range(11))
    assert [json.loads(x)["n"] for x in first.read_text().splitlines()] == [11, 12]
    assert transcript.claim(tmp_path, "coder").name == "03_coder_transcript.jsonl"


def test_a_transcript_that_cannot_be_written_is_dropped(tmp_path: Path) -> None:
    kept = transcript.Transcript(tmp_path / "missing" / "t.jsonl")
    kept.write("{}")  # no directory: no error, no file
    kept.write("{}")
    assert not (tmp_path / "missing").exists()


# --- the --version probe -------------------------------------------------------------------------


def test_a_hanging_version_probe_times_out_and_its_group_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert versions.TIMEOUT == 10
    monkeypatch.setattr(versions, "TIMEOUT", 1.0)
    pidfile = tmp_path / "child.pid"
    program = tmp_path / "hangs"
    program.write_text(
        f"#!{sys.executable}\n"
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '300'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(300)\n"
    )
    program.chmod(0o755)
    versions._reported.cache_clear()
    started = time.monotonic()
    with pytest.raises(BadInput) as caught:
        versions.require(str(program), {}, "Claude Code", (2, 1, 0))
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert "timed out after 1 seconds" in message and message.count("\n") == 0
    assert "or set agent.command" in message
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child), "the probe's child outlived it"
    assert not os.path.exists(f"/proc/{child}") or pid_alive(child) is False
