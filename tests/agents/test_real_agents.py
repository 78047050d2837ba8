"""The real agent CLIs under cairn, end to end: Claude Code 2.1.328 and Codex 0.169.0 run by
``cairn run`` / ``cairn resume`` (or by hand) in subprocesses, against cairn's scripted model
server on 127.0.0.1 (``cairn.modelserver``, docs/model-server.md).

The model server plays the model: each test scripts the tool calls the model makes (Claude
Code's ``Write``, ``Edit`` and ``Bash``; Codex's ``exec_command``; an MCP tool), and afterwards
reads back what each CLI sent it, so a test can check what the agent was told: the dispatch and
handoff prompts, the previous conversation when a session is resumed, hook context. Everything
else is read back as a person would: exit code, change summary, journal, marker, snapshots.

The CLIs are found on PATH, else in ``<repo>/.agents/node_modules/.bin`` (where ``.ci/run``
installs them). Missing: the tests skip, unless ``CAIRN_REQUIRE_AGENT_CLIS=1`` (CI) makes that a
failure. No network beyond 127.0.0.1: the CLIs get a fake key and the server's URL, a scratch
HOME / CODEX_HOME, and telemetry off.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents.real_agents import (
    BUDGET,
    HANDOFF,
    TASKS,
    TICKET,
    Real,
    bash_tool,
    capped_then_done,
    codex_command,
    exec_tool,
    hook_context,
    latest,
    no_traceback,
    outcome,
    toml_value,
    write_tool,
)
from cairn import summary
from cairn.modelserver import user_texts
from cairn.state import journal, marker
from cairn.summary.render import status_line
from cairn.terms import ENV_RUN_DIR
from cairn.util import clock
from helpers import assert_error, git, snapshot_files, state_files, summary_file

pytestmark = pytest.mark.slow

WIP_REF = f"refs/cairn/wip/{TICKET}"


# --- scenario pieces ----------------------------------------------------------------------------


def edit_tool(path: Path, old: str, new: str) -> dict[str, Any]:
    return {
        "name": "Edit",
        "input": {"file_path": str(path), "old_string": old, "new_string": new},
    }


# --- reading what the model was told ------------------------------------------------------------


def tool_calls(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The model's earlier tool calls a request replays (Anthropic ``tool_use`` blocks, Responses
    ``function_call`` items): proof that a resumed session kept its conversation."""
    body = request["body"]
    if request["api"] == "anthropic":
        return [
            block
            for message in body["messages"]
            if message["role"] == "assistant" and isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_use"
        ]
    return [item for item in body.get("input", []) if item.get("type") == "function_call"]


def all_texts(request: dict[str, Any]) -> str:
    return "\n".join(user_texts(request))


def run_at_cutoff(project: Real) -> tuple[dict[str, Any], str]:
    """The journal's (only) cutoff and its snapshot commit."""
    cutoffs = project.events("cutoff")
    assert len(cutoffs) == 1, cutoffs
    assert cutoffs[0]["snapshot"], cutoffs[0]
    return cutoffs[0], cutoffs[0]["snapshot"]


def snapshot_base(repo: Path, commit: str) -> str:
    """The HEAD a snapshot was taken on (its ``Cairn-Base`` trailer)."""
    for line in git(repo, "cat-file", "commit", commit).splitlines():
        if line.startswith("Cairn-Base: "):
            return line.removeprefix("Cairn-Base: ").strip()
    raise AssertionError(f"{commit} has no Cairn-Base")


def tracked(repo: Path, commit: str) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", commit).split())


# --- 1. Claude Code: the full story -------------------------------------------------------------


def claude_story(repo: Path) -> dict[str, Any]:
    a, b, c = repo / "a.txt", repo / "b.txt", repo / "c.txt"
    return {
        "anthropic": [
            # dispatch 1, --max-turns 4
            {"text": "Task 1: creating a.txt.", "tool": write_tool(a, "one\n")},
            {"tool": edit_tool(a, "one", "ONE")},
            {
                "tool": bash_tool(
                    "git add a.txt && git commit -qm 'task 1' && cairn task done 1 --files a.txt "
                    "--outcome 'a.txt says ONE' && cairn task start 2"
                )
            },
            {"text": "Task 2: creating b.txt.", "tool": write_tool(b, "two\n")},  # the cap
            # dispatch 2 (the continuation, --resume SESSION)
            {"tool": bash_tool("cairn task done 2 --files b.txt --outcome 'b.txt exists'")},
            {"tool": write_tool(c, "three\n")},
            {
                "tool": bash_tool(
                    "git add b.txt c.txt && git commit -qm 'tasks 2 and 3' && "
                    "cairn task done 3 --files c.txt --outcome 'c.txt exists'"
                )
            },
            {"text": "All three tasks are done."},
        ]
    }


def test_claude_code_cutoff_snapshot_handoff_resume_and_in_loop_budget(
    real: Callable[..., Real], claude_bin: Path
) -> None:
    p = real(
        "claude-code",
        claude_story,
        max_turns=4,
        budget_pressure_turns=2,
        max_continuations=1,
    )
    result = p.run()
    no_traceback(result)
    assert result.returncode == 0, (result.stdout, result.stderr)
    got = outcome(result)
    assert got["status"] == "completed" and got["dispatches"] == 2, got

    # The run is complete: every task, the files, no marker.
    final = p.summary()
    assert status_line(final) == "Completed — 3 of 3 tasks"
    assert [t.status for t in final.tasks] == ["completed"] * 3
    assert final.files_changed == ["a.txt", "b.txt", "c.txt"]
    assert not p.marker_path.exists()
    assert (p.repo / "a.txt").read_text() == "ONE\n"  # Write, then Edit
    assert git(p.repo, "status", "--porcelain").strip() == ""

    # Dispatch 1 hit Claude's own turn cap right after writing a new, untracked b.txt.
    finished = p.events("dispatch_finished")
    assert [e["reason"] for e in finished] == ["max_turns", "completed"]
    assert [e["turns"] for e in finished] == [4, 4]
    cutoff, snap = run_at_cutoff(p)
    assert cutoff["reason"] == "max_turns"
    saved = snapshot_files(p.repo, snap)
    assert saved["b.txt"] == b"two\n" and saved["a.txt"] == b"ONE\n"
    assert "b.txt" not in tracked(p.repo, snapshot_base(p.repo, snap))  # untracked at cutoff
    # It was the ticket's wip ref then; later snapshots build on it.
    git(p.repo, "merge-base", "--is-ancestor", snap, WIP_REF)

    # Exactly the scripted model calls were made: 4 per dispatch, none past the script.
    requests = p.requests()
    assert [r["entry"] for r in requests] == list(range(8)), [r["entry"] for r in requests]
    first, handoff = requests[0], requests[4]
    assert "You are the coder for ticket T-1" in latest(first)
    assert HANDOFF not in all_texts(first)

    # The continuation resumed the session (claude --resume SESSION): its first request carries
    # the whole earlier conversation, and the handoff prompt is the newest user turn.
    session = finished[0]["session_id"]
    assert session and finished[1]["session_id"] == session
    assert handoff["body"]["messages"][0] == first["body"]["messages"][0]  # the dispatch prompt
    earlier = [call["input"].get("file_path") for call in tool_calls(handoff)]
    assert earlier == [str(p.repo / "a.txt"), str(p.repo / "a.txt"), None, str(p.repo / "b.txt")]
    told = latest(handoff)
    assert HANDOFF in told and "stopped: max_turns" in told
    assert "Completed:\n- Task 1: One (completed)" in told
    assert "In progress when it stopped:\n- Task 2: Two" in told
    assert snap[:12] in told
    transcripts = list((p.tmp / "agent-home" / ".claude" / "projects").glob("*/*.jsonl"))
    assert [t.name for t in transcripts] == [f"{session}.jsonl"]  # one session, continued

    # The budget directive reached the model inside Claude's loop, through cairn's PostToolUse
    # hook (a system message after the tool result), once turns left <= 2; never before.
    dispatch1 = requests[:4]
    assert [bool(hook_context(r)) for r in dispatch1] == [False, False, True, True]
    assert [BUDGET in latest(r) for r in dispatch1] == [False, False, True, True]
    assert hook_context(dispatch1[2])[0].startswith("PostToolUse:Edit hook additional context:")
    assert f"{BUDGET} 2 turn(s) left" in hook_context(dispatch1[2])[0]
    assert f"{BUDGET} 1 turn(s) left" in hook_context(dispatch1[3])[0]
    assert not any(BUDGET in all_texts(r) for r in requests[:2])


def test_claude_budget_hook_counts_only_this_dispatchs_turns(
    real: Callable[..., Real], claude_bin: Path
) -> None:
    p = real(
        "claude-code",
        capped_then_done,
        tasks=("One",),
        max_turns=3,
        budget_pressure_turns=1,
        max_continuations=1,
    )
    result = p.run()
    no_traceback(result)
    assert result.returncode == 0, (result.stdout, result.stderr)
    requests = p.requests()
    assert len(requests) == 5
    assert HANDOFF in latest(requests[3])
    # Dispatch 1: the directive after turn 2 of 3 (1 left), as configured.
    assert [bool(hook_context(r)) for r in requests[:3]] == [False, False, True]
    # Dispatch 2 has used 1 of its 3 turns when its first tool call returns: no directive.
    assert hook_context(requests[4]) == [], hook_context(requests[4])


# --- 2. Codex: the same story, cairn's own turn cap, then cairn resume --------------------------

CODEX_STORY = {
    "openai": [
        # cairn run: max_turns 3 (a turn is a completed step)
        {"tool": exec_tool("printf 'one\\n' > a.txt")},
        {
            "tool": exec_tool(
                "git add a.txt && git commit -qm 'task 1' && "
                "cairn task done 1 --files a.txt --outcome 'a.txt exists' && cairn task start 2"
            )
        },
        {
            # Step 3 creates b.txt: cairn stops Codex there, while the second call still runs,
            # so the dying Codex never asks the model for more.
            "tools": [exec_tool("printf 'two\\n' > b.txt"), exec_tool("sleep 5")],
        },
        # cairn resume: codex exec resume THREAD with the handoff prompt
        {"tool": exec_tool("cairn task done 2 --files b.txt --outcome 'b.txt exists'")},
        {
            "tool": exec_tool(
                "printf 'three\\n' > c.txt && git add b.txt c.txt && "
                "git commit -qm 'tasks 2 and 3' && cairn task done 3 --files c.txt"
            )
        },
        {"text": "All three tasks are done."},
    ]
}


def test_codex_cairn_caps_it_after_a_new_file_and_resume_continues_the_thread(
    real: Callable[..., Real], codex_bin: Path
) -> None:
    p = real("codex", CODEX_STORY, max_turns=3, budget_pressure_turns=1, max_continuations=0)
    result = p.run()
    no_traceback(result)
    assert result.returncode == 3, (result.stdout, result.stderr)
    got = outcome(result)
    assert got["status"] == "interrupted" and got["reason"] == "max_turns", got
    assert got["next_command"] == f"cairn resume {TICKET}"

    # Stopped by cairn mid-task 2, right after Codex created the untracked b.txt.
    stopped = p.summary()
    assert stopped.status.state == "interrupted"
    assert status_line(stopped).startswith("Interrupted — max_turns during task 2 of 3"), (
        status_line(stopped)
    )
    assert [t.status for t in stopped.tasks] == ["completed", "in progress", "pending"]
    cutoff, snap = run_at_cutoff(p)
    assert cutoff["reason"] == "max_turns"
    assert git(p.repo, "rev-parse", WIP_REF).strip() == snap
    assert snapshot_files(p.repo, snap)["b.txt"] == b"two\n"
    assert git(p.repo, "status", "--porcelain", "b.txt").strip() == "?? b.txt"
    assert "b.txt" not in tracked(p.repo, snapshot_base(p.repo, snap))
    (first_dispatch,) = p.events("dispatch_finished")
    assert first_dispatch["reason"] == "max_turns" and first_dispatch["turns"] == 3
    thread = first_dispatch["session_id"]
    assert thread
    marked = marker.read(p.marker_path)
    assert marked is not None and marked.snapshot is not None and marked.snapshot.commit == snap
    assert [r["entry"] for r in p.requests()] == [0, 1, 2]  # nothing asked after the stop

    resumed = p.resume()
    no_traceback(resumed)
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert outcome(resumed)["status"] == "completed"
    final = p.summary()
    assert status_line(final) == "Completed — 3 of 3 tasks"
    assert [t.status for t in final.tasks] == ["completed"] * 3
    assert not p.marker_path.exists()
    assert git(p.repo, "status", "--porcelain").strip() == ""

    # The resumed dispatch ran `codex exec resume THREAD`: its first request replays the
    # thread (the first prompt and all three earlier commands) and ends with the handoff.
    requests = p.requests()
    assert [r["entry"] for r in requests] == list(range(6)), [r["entry"] for r in requests]
    again = requests[3]
    assert "You are the coder for ticket T-1" in all_texts(again)
    commands = [json.loads(call["arguments"])["cmd"] for call in tool_calls(again)]
    assert commands[0] == "printf 'one\\n' > a.txt" and "printf 'two\\n' > b.txt" in commands
    told = latest(again)
    assert HANDOFF in told and "max_turns (the run was resumed with cairn resume)" in told
    assert "In progress when it stopped:\n- Task 2: Two" in told
    later = p.events("dispatch_finished")[1:]
    assert [e["session_id"] for e in later] == [thread]
    rollouts = list((p.tmp / "codex-home" / "sessions").rglob("*.jsonl"))
    assert len(rollouts) == 1 and thread in rollouts[0].name, rollouts


def test_codex_workspace_write_alone_lets_cairn_report(
    real: Callable[..., Real], codex_bin: Path
) -> None:
    def scenario(repo: Path) -> dict[str, Any]:
        return {
            "openai": [
                {"tool": exec_tool("printf 'one\\n' > a.txt && cairn task done 1 --files a.txt")},
                {"text": "Task 1 is done."},
            ]
        }

    p = real("codex", scenario, tasks=("One",), max_turns=2)
    # As docs/agents.md configures Codex: no extra writable root for .git.
    command = codex_command(p.server.url, p.repo, git_writable=False)
    config = (p.repo / "cairn.toml").read_text().splitlines()
    config = [f"command = {toml_value(command)}" if c.startswith("command") else c for c in config]
    (p.repo / "cairn.toml").write_text("\n".join(config) + "\n")
    git(p.repo, "commit", "-qam", "plain workspace-write")
    result = p.run()
    no_traceback(result)
    outputs = [latest(r) for r in p.requests()[1:]]
    assert not any("Read-only file system" in text for text in outputs), outputs
    assert result.returncode == 0, (result.stdout, result.stderr)


# --- 3. agent-side failures: a clear cutoff reason and saved state ------------------------------


@pytest.mark.parametrize("kind", ["claude-code", "codex"])
def test_model_outage_is_an_error_cutoff_not_a_traceback(
    real: Callable[..., Real], kind: str, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue("claude_bin" if kind == "claude-code" else "codex_bin")
    outage = {"error": 500, "message": "scripted outage"}
    # No retry by cairn here (agent.api_retries = 0; test_real_truthful.py covers those).
    p = real(
        kind, {"after_end": outage}, max_turns=3, max_continuations=0, agent={"api_retries": 0}
    )
    # Claude Code retries a 500 up to 10 times with backoff (minutes); one retry is enough here.
    # Codex: request_max_retries=0 in the provider, so its first 500 is turn.failed.
    result = p.run(env={"CLAUDE_CODE_MAX_RETRIES": "1"})
    no_traceback(result)
    assert result.returncode == 3, (result.stdout, result.stderr)
    got = outcome(result)
    assert got["status"] == "interrupted" and got["reason"] == "error", got
    stopped = p.summary()
    assert stopped.status.state == "interrupted"
    assert status_line(stopped).startswith("Interrupted — error"), status_line(stopped)
    (finished,) = p.events("dispatch_finished")
    assert finished["reason"] == "error"
    # Claude passes the server's message on; Codex says its own words about a 500.
    expected = "API Error: 500 scripted outage" if kind == "claude-code" else "demand"
    assert expected in (finished["detail"] or ""), finished
    assert [e["reason"] for e in p.events("cutoff")] == ["error"]
    assert p.events()[-1]["event"] == "run_interrupted"
    assert marker.read(p.marker_path) is not None  # resumable
    requests = p.requests()
    assert requests and all(r["entry"] is None for r in requests)
    assert len(requests) == (2 if kind == "claude-code" else 1)  # the call and its one retry


@pytest.mark.parametrize(
    ("kind", "command"),
    [("claude-code", ["no-such-claude"]), ("codex", ["no-such-codex", "exec"])],
)
def test_missing_cli_is_one_line_and_writes_nothing(
    real: Callable[..., Real], kind: str, command: list[str]
) -> None:
    p = real(kind, {}, command=command)
    result = p.run()  # with --json: the error is one JSON object on stdout
    assert f"'{command[0]}' is not on PATH" in assert_error(result, 2)
    assert state_files(p.repo / ".git" / "cairn") == []
    assert git(p.repo, "for-each-ref", "refs/cairn").strip() == ""
    assert p.requests() == []


# --- 4. cairn hooks install claude, proven with Claude Code driven by hand ----------------------


def test_hooks_install_claude_by_hand_gets_catchup_and_snapshots(
    real: Callable[..., Real], claude_bin: Path
) -> None:
    def scenario(repo: Path) -> dict[str, Any]:
        return {
            "anthropic": [
                # cairn run, --max-turns 2: interrupted mid-task 1
                {"tool": write_tool(repo / "a.txt", "one\n")},
                {"tool": write_tool(repo / "b.txt", "two\n")},
                # claude -p by hand, with cairn's hooks in .claude/settings.json
                {"tool": write_tool(repo / "notes.txt", "by hand\n")},
                {"text": "The last cairn run stopped in task 1; shall I continue it?"},
            ]
        }

    p = real("claude-code", scenario, branch=TICKET, max_turns=2, max_continuations=0)
    interrupted = p.run()
    no_traceback(interrupted)
    assert interrupted.returncode == 3, (interrupted.stdout, interrupted.stderr)
    cutoff_snapshot = git(p.repo, "rev-parse", WIP_REF).strip()

    installed = p.cairn("hooks", "install", "claude", "--project")
    assert installed.returncode == 0, installed.stderr
    settings = json.loads((p.repo / ".claude" / "settings.json").read_text())
    assert {"SessionStart", "Stop", "SessionEnd"} <= set(settings["hooks"])

    by_hand = p.claude(
        "-p",
        "hello",
        "--output-format",
        "stream-json",
        "--verbose",
        "--max-turns",
        "5",
        "--dangerously-skip-permissions",
    )
    assert by_hand.returncode == 0, by_hand.stderr.decode()
    lines = [json.loads(line) for line in by_hand.stdout.decode().splitlines() if line.strip()]
    assert lines[-1]["type"] == "result" and lines[-1]["subtype"] == "success", lines[-1]

    # SessionStart: the catch-up paragraph reached the model with the user's first prompt.
    requests = p.requests()
    assert [r["entry"] for r in requests] == [0, 1, 2, 3]
    first = requests[2]
    assert requests[0]["body"]["messages"][0] != first["body"]["messages"][0]  # a new session
    context = [t for t in hook_context(first, newest=False) if "You were in the middle of" in t]
    assert context, user_texts(first)
    assert context[0].startswith("SessionStart hook additional context: You were in the middle")
    assert f"cairn resume {TICKET}" in context[0]
    assert "hello" in latest(first)
    assert not any("You were in the middle of" in t for t in user_texts(requests[0]))

    # Stop / SessionEnd: the dirty tree (the new notes.txt) was snapshotted for the ticket.
    moved = git(p.repo, "rev-parse", WIP_REF).strip()
    assert moved != cutoff_snapshot
    assert snapshot_files(p.repo, moved)["notes.txt"] == b"by hand\n"
    assert "notes.txt" not in snapshot_files(p.repo, cutoff_snapshot)
    message = git(p.repo, "cat-file", "commit", moved)
    assert "Cairn-Reason: claude stop" in message or "Cairn-Reason: claude session-end" in message
    assert git(p.repo, "status", "--porcelain", "notes.txt").strip() == "?? notes.txt"
    # The interrupted run is still there to resume: the hooks only save and tell.
    assert marker.read(p.marker_path) is not None


# --- 5. cairn mcp with the real Claude Code -----------------------------------------------------


def test_cairn_mcp_task_done_from_claude_code(real: Callable[..., Real], claude_bin: Path) -> None:
    from cairn.config import load
    from cairn.git import Repo
    from cairn.state.layout import Layout
    from cairn.state.runstate import begin

    report = {
        "name": "mcp__cairn__task_done",
        "input": {"task": 1, "files": ["a.txt"], "outcome": "reported over MCP"},
    }
    p = real("claude-code", {"anthropic": [{"tool": report}, {"text": "Reported."}]})
    found = Repo.discover(p.repo)

    def scaffold(run_id: str) -> summary.Summary:
        pairs = [(n, title) for n, title in enumerate(TASKS, 1)]
        return summary.scaffold_tasks(TICKET, run_id, pairs, clock.now())

    ref, lease = begin(
        Layout.for_repo(found, load(found.toplevel)), TICKET, scaffold, stale_after=86400
    )
    p.run_leases.append(lease)
    config = p.tmp / "cairn-mcp.json"
    server = {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "cairn", "mcp", "-C", str(p.repo)],
    }
    config.write_text(json.dumps({"mcpServers": {"cairn": server}}))

    done = p.claude(
        "-p",
        "Report task 1 as done.",
        "--output-format",
        "stream-json",
        "--verbose",
        "--max-turns",
        "3",
        "--mcp-config",
        str(config),
        "--allowedTools",
        "mcp__cairn",
        env={ENV_RUN_DIR: str(ref.run_dir)},
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
    init = next(line for line in lines if line.get("subtype") == "init")
    servers = {s["name"]: s["status"] for s in init["mcp_servers"]}
    assert servers == {"cairn": "connected"}, init["mcp_servers"]
    assert "mcp__cairn__task_done" in init["tools"]

    requests = p.requests()
    assert [r["entry"] for r in requests] == [0, 1]
    # Claude offers MCP tools as deferred tools: named in the request, loaded on demand.
    offered = [t["name"] for t in requests[0]["body"].get("tools", [])]
    assert "mcp__cairn__task_done" in offered or any(
        "mcp__cairn__task_done" in t for t in user_texts(requests[0])
    )
    # What Claude shows the model of the tool's answer: cairn's structured content.
    answer = json.loads(latest(requests[1]))
    assert answer["ticket"] == TICKET and answer["run"] == ref.run_id
    assert answer["status"] == "In progress — task 2 of 3"
    assert (answer["resolved"], answer["total"]) == (1, 3)

    final = summary.load(summary_file(ref))
    assert final is not None
    task = final.task(1)
    assert task is not None and task.status == "completed"
    assert task.files == ["a.txt"] and task.outcome == "reported over MCP"
    assert [t.status for t in final.tasks] == ["completed", "pending", "pending"]
    (event,) = [e for e in journal.read(ref.run_dir)[0] if e["event"] == "task"]
    assert event["task"] == 1 and event["status"] == "completed"
