"""Fixtures shared by the tests in tests/run/."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import (
    git,
    make_repo,
)
from run.run_setup import TICKET, Project, toml_value


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Callable[..., Project]]:
    """A factory: ``project(script, tasks=..., **agent_keys)`` builds repo, plan and script."""
    made: list[Project] = []

    def build(
        script: dict[str, Any] | str,
        *,
        tasks: tuple[str, ...] = ("One", "Two"),
        phases: tuple[str, ...] = ("implement",),
        max_rounds: int = 3,
        max_turns: int = 3,
        budget_pressure_turns: int = 1,
        max_continuations: int = 0,
        cutoff_timeout_ms: int = 3000,
        **agent: Any,
    ) -> Project:
        script_path = tmp_path / "agent-script.yaml"
        script_path.write_text(script if isinstance(script, str) else json.dumps(script, indent=1))
        keys = {
            "kind": "scripted",
            "script": str(script_path),
            "max_turns": max_turns,
            "budget_pressure_turns": budget_pressure_turns,
            "max_continuations": max_continuations,
            "cutoff_timeout_ms": cutoff_timeout_ms,
            **agent,
        }
        config = "[agent]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in keys.items())
        config += f"\n[loop]\nphases = {toml_value(list(phases))}\nmax_rounds = {max_rounds}\n"
        initial = {"README.md": "hello\n", "src/app.py": "print('app')\n", "cairn.toml": config}
        repo = make_repo(tmp_path / "repo", initial)
        git(repo, "config", "user.name", "Scripted Agent")
        git(repo, "config", "user.email", "agent@example.com")
        plan = tmp_path / f"{TICKET}.md"
        sections = [f"### Task {n}: {title}\n\nDo {title}.\n" for n, title in enumerate(tasks, 1)]
        plan.write_text("# Plan: test plan\n\n" + "\n".join(sections))
        made.append(Project(repo, plan, script_path, initial))
        return made[-1]

    yield build
    for made_project in made:
        made_project.cleanup()
