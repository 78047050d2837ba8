"""Fixtures shared by the tests in tests/agents/."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.real_agents import (
    CLAUDE_COMMAND,
    TASKS,
    TICKET,
    Real,
    agent_env,
    codex_command,
    find_cli,
    toml_value,
    venv_has_cairn,
)
from cairn.modelserver import ModelServer
from helpers import git, make_repo


@pytest.fixture
def claude_bin() -> Path:
    return find_cli("claude")


@pytest.fixture
def codex_bin() -> Path:
    return find_cli("codex")


@pytest.fixture
def real(tmp_path: Path) -> Iterator[Callable[..., Real]]:
    """A factory: ``real(kind, scenario, **agent keys)``. ``scenario`` is a mapping, or a
    function of the repository path (Claude Code's ``Write`` wants absolute paths); ``agent``
    adds ``[agent]`` keys, ``no_command`` leaves ``agent.command`` out, ``tables`` is more of
    the config (``[agents.NAME]`` tables)."""
    made: list[Real] = []

    def build(
        kind: str,
        scenario: dict[str, Any] | Callable[[Path], dict[str, Any]],
        *,
        command: list[str] | None = None,
        branch: str = "main",
        tasks: tuple[str, ...] = TASKS,
        max_turns: int = 4,
        budget_pressure_turns: int = 0,
        max_continuations: int = 0,
        cutoff_timeout_ms: int = 3000,
        no_command: bool = False,
        agent: dict[str, Any] | None = None,
        tables: str = "",
    ) -> Real:
        venv_has_cairn()
        tmp = tmp_path.resolve()
        repo = tmp / "repo"
        record = tmp / "requests.jsonl"
        server = ModelServer(scenario(repo) if callable(scenario) else scenario, record)
        url = server.start()
        if command is None:
            command = CLAUDE_COMMAND if kind == "claude-code" else codex_command(url, repo)
        keys = {
            "kind": kind,
            "command": command,
            "max_turns": max_turns,
            "budget_pressure_turns": budget_pressure_turns,
            "max_continuations": max_continuations,
            "cutoff_timeout_ms": cutoff_timeout_ms,
            **(agent or {}),
        }
        if no_command:  # what a new user tries first: cairn's permission preset decides
            del keys["command"]
        config = "[agent]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in keys.items())
        config += '\n[loop]\nphases = ["implement"]\n' + tables
        make_repo(repo, {"README.md": "hello\n", "cairn.toml": config}, branch=branch)
        git(repo, "config", "user.name", "Real Agent")
        git(repo, "config", "user.email", "agent@example.com")
        plan = tmp / f"{TICKET}.md"
        sections = [f"### Task {n}: {title}\n\nDo {title}.\n" for n, title in enumerate(tasks, 1)]
        plan.write_text("# Plan: real agents\n\n" + "\n".join(sections))
        made.append(Real(tmp, repo, plan, server, record, agent_env(tmp, url)))
        return made[-1]

    yield build
    for project in made:
        project.cleanup()
