"""Failover between the real agent CLIs: Claude Code answered a usage limit after task 1 of 3
and Codex finishes tasks 2 and 3 from the snapshot and the change summary (and the reverse), in
the same work tree and run: the file the first agent left uncommitted is in the second's tree,
no completed task is redone, the summary says which agent did each task, usage is kept per
agent. And a ``command`` agent as the fallback. Against cairn's scripted model server on
127.0.0.1, as tests/agents/test_real_agents.py does."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents.real_agents import (
    CLAUDE_COMMAND,
    HANDOFF,
    Real,
    bash_tool,
    codex_command,
    exec_tool,
    latest,
    no_traceback,
    outcome,
    toml_value,
    write_tool,
)
from cairn.summary.render import status_line
from helpers import git, snapshot_files

pytestmark = pytest.mark.slow

LIMIT = {"limit": "usage", "resets_in": 7200}
# Claude Code shows a usage limit only when logged in to a subscription (test_real_limits.py)
SUBSCRIPTION = {"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-fake"}


def named(name: str, **keys: Any) -> str:
    return f"\n[agents.{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in keys.items())


def logged_in(project: Real) -> Real:
    """Claude Code with a (fake) subscription instead of an API key."""
    del project.env["ANTHROPIC_API_KEY"]
    project.env.update(SUBSCRIPTION)
    return project


def check_handed_over(p: Real, first: str, second: str, counted: bool = True) -> dict[str, Any]:
    """What every failover ends with: completed, one switch, task 1 by ``first`` and not
    redone, tasks 2 and 3 by ``second``, the draft ``first`` left uncommitted seen by
    ``second``, the usage of each agent (``counted``: the second reports its own; a command
    agent reports none, which is unknown, never 0)."""
    result = p.run()
    no_traceback(result)
    assert result.returncode == 0, (result.stdout, result.stderr)
    got = outcome(result)
    assert got["status"] == "completed", got
    final = p.summary()
    assert status_line(final) == "Completed — 3 of 3 tasks"
    assert [t.agent for t in final.tasks] == [first, second, second]
    done = [e["task"] for e in p.events("task") if e["status"] == "completed"]
    assert done == [1, 2, 3]  # task 1 once: not redone
    (switched,) = p.events("agent_switched")
    assert (switched["from"], switched["to"], switched["reason"]) == (first, second, "usage_limit")
    (cut,) = p.events("cutoff")
    assert cut["reason"] == "usage_limit" and cut["detail"].startswith(f"usage limit of {first}")
    assert "resets " in cut["detail"] and "unknown" not in cut["detail"]
    # the draft the first agent left uncommitted was saved at the cutoff and in the second's tree
    assert snapshot_files(p.repo, cut["snapshot"])["draft.txt"] == b"half\n"
    assert (p.repo / "seen.txt").read_text() == "half\n"
    finished = p.events("dispatch_finished")
    assert [(e["agent"], e.get("failure")) for e in finished] == [
        (first, "usage_limit"),
        (second, None),
    ]
    assert list(got["usage_by_agent"]) == [first, second]
    assert (got["usage_by_agent"][second] is not None) == counted
    assert git(p.repo, "status", "--porcelain").strip() == ""
    return got


def claude_limited(repo: Path) -> list[dict[str, Any]]:
    return [
        {"tool": write_tool(repo / "a.txt", "one\n")},
        {
            "tool": bash_tool(
                "git add a.txt && git commit -qm 'task 1' && cairn task done 1 --files a.txt "
                "&& cairn task start 2"
            )
        },
        {"tool": write_tool(repo / "draft.txt", "half\n")},
        LIMIT,
    ]


def codex_finishes() -> list[dict[str, Any]]:
    return [
        {"tool": exec_tool("cat draft.txt > seen.txt && printf 'two\\n' > b.txt")},
        {"tool": exec_tool("cairn task done 2 --files b.txt")},
        {
            "tool": exec_tool(
                "printf 'three\\n' > c.txt && git add -A && git commit -qm 'tasks 2 and 3' && "
                "cairn task done 3 --files c.txt"
            )
        },
        {"text": "Tasks 2 and 3 are done."},
    ]


def test_claude_at_its_usage_limit_hands_over_to_codex(
    real: Callable[..., Real], claude_bin: Path, codex_bin: Path, tmp_path: Path
) -> None:
    repo = tmp_path.resolve() / "repo"

    def scenario(repo: Path) -> dict[str, Any]:
        return {"anthropic": claude_limited(repo), "openai": codex_finishes()}

    # the server's URL is known once it runs: Codex's command is written after
    p = real(
        "claude-code",
        scenario,
        max_turns=6,
        agent={"fallback": ["codex"]},
        tables=named("codex", kind="codex", command=codex_command("URL", repo), max_turns=6),
    )
    toml = (p.repo / "cairn.toml").read_text().replace("URL", p.server.url)
    (p.repo / "cairn.toml").write_text(toml)
    git(p.repo, "commit", "-qam", "the model server's URL")
    got = check_handed_over(logged_in(p), "claude-code", "codex")
    requests = p.requests()
    assert [r["api"] for r in requests] == ["anthropic"] * 4 + ["openai"] * 4
    told = latest(requests[4])
    assert HANDOFF in told and "usage limit of claude-code" in told
    assert "Completed:\n- Task 1: One (completed)" in told
    assert got["dispatches"] == 2


def test_codex_at_its_usage_limit_hands_over_to_claude(
    real: Callable[..., Real], claude_bin: Path, codex_bin: Path
) -> None:
    def scenario(repo: Path) -> dict[str, Any]:
        return {
            "openai": [
                {"tool": exec_tool("printf 'one\\n' > a.txt")},
                {
                    "tool": exec_tool(
                        "git add a.txt && git commit -qm 'task 1' && cairn task done 1 "
                        "--files a.txt && cairn task start 2 && printf 'half\\n' > draft.txt"
                    )
                },
                LIMIT,
            ],
            "anthropic": [
                {"tool": bash_tool("cat draft.txt > seen.txt && printf 'two\\n' > b.txt")},
                {"tool": bash_tool("cairn task done 2 --files b.txt")},
                {
                    "tool": bash_tool(
                        "printf 'three\\n' > c.txt && git add -A && git commit -qm 'tasks 2 "
                        "and 3' && cairn task done 3 --files c.txt"
                    )
                },
                {"text": "Tasks 2 and 3 are done."},
            ],
        }

    p = real(
        "codex",
        scenario,
        max_turns=6,
        agent={"fallback": ["claude"]},
        tables=named("claude", kind="claude-code", command=CLAUDE_COMMAND, max_turns=6),
    )
    check_handed_over(p, "codex", "claude")
    told = latest(next(r for r in p.requests() if r["api"] == "anthropic"))
    assert HANDOFF in told and "usage limit of codex" in told


FINISHER = """\
import subprocess, sys
prompt = sys.stdin.read()
assert "usage limit of claude-code" in prompt, prompt
open("seen.txt", "w").write(open("draft.txt").read())
for n, name, text in ((2, "b.txt", "two"), (3, "c.txt", "three")):
    open(name, "w").write(text + "\\n")
    subprocess.run(["cairn", "task", "done", str(n), "--files", name], check=True)
subprocess.run("git add -A && git commit -qm 'tasks 2 and 3'", shell=True, check=True)
"""


def test_a_command_agent_as_the_fallback(
    real: Callable[..., Real], claude_bin: Path, tmp_path: Path
) -> None:
    finisher = tmp_path / "finisher.py"
    finisher.write_text(FINISHER)
    p = real(
        "claude-code",
        lambda repo: {"anthropic": claude_limited(repo)},
        max_turns=6,
        agent={"fallback": ["finisher"]},
        tables=named("finisher", kind="command", command=[sys.executable, str(finisher)]),
    )
    got = check_handed_over(logged_in(p), "claude-code", "finisher", counted=False)
    assert got["usage_by_agent"]["claude-code"]["total_tokens"] > 0
