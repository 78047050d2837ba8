"""The composite action (action.yml) is what docs/ci.md says: it parses, its inputs are the
documented ones, every shell step declares its shell and takes its inputs through ``env:``
only, and its steps' scripts, run by bash as the runner runs them with stand-in ``cairn`` and
``npm`` programs, call the documented commands."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from doc_blocks import ROOT, blocks
from helpers import git, make_repo

ACTION = ROOT / "action.yml"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def action() -> dict[str, Any]:
    loaded = yaml.safe_load(ACTION.read_text())
    assert isinstance(loaded, dict)
    return loaded


def step(step_id: str | None = None, name: str | None = None) -> dict[str, Any]:
    for found in action()["runs"]["steps"]:
        if (step_id is not None and found.get("id") == step_id) or found.get("name") == name:
            return dict(found)
    raise AssertionError(f"action.yml has no step {step_id or name}")


def documented_inputs() -> dict[str, str]:
    """The inputs table of docs/ci.md: input → its default column."""
    text = (ROOT / "docs" / "ci.md").read_text().split("\n## Inputs\n", 1)[1].split("\n## ")[0]
    return dict(re.findall(r"^\| `([a-z-]+)` \| ([^|]+?) \|", text, re.M))


def test_the_action_parses_as_a_composite_action() -> None:
    loaded = action()
    assert loaded["name"] and loaded["description"]
    assert loaded["runs"]["using"] == "composite"
    ids = {s.get("id") for s in loaded["runs"]["steps"]}
    for name, output in loaded["outputs"].items():
        (expression,) = EXPRESSION.findall(output["value"])
        match = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expression)
        assert match is not None, expression
        step_id, out = match.groups()
        assert step_id in ids and out == name
    assert set(loaded["outputs"]) == {"status", "branch"}


def test_every_input_is_documented_and_every_documented_input_is_one() -> None:
    inputs = action()["inputs"]
    assert set(inputs) == set(documented_inputs())
    assert {"plan", "ticket", "agent", "max-turns", "max-cost-usd", "remote"} <= set(inputs)
    for name, spec in inputs.items():
        assert spec["description"], name
        assert spec.get("required", False) is False, f"{name}: required is not enforced by GitHub"
        assert f"inputs.{name} }}}}" in ACTION.read_text(), f"{name} is never used"
    assert inputs["remote"]["default"] == "origin"
    assert inputs["github-token"]["default"] == "${{ github.token }}"


def test_every_shell_step_declares_its_shell_and_reads_no_expression() -> None:
    for found in action()["runs"]["steps"]:
        if "run" in found:
            assert found.get("shell") == "bash", found.get("name")
            # an input, the event's text, anything: given through env, never into the script
            assert "${{" not in found["run"], found.get("name")
        else:
            assert re.fullmatch(r"[\w-]+/[\w-]+@v\d+", found["uses"]), found["uses"]


def test_the_run_step_calls_the_documented_commands() -> None:
    script = step("run")["run"]
    assert re.search(r'cairn catchup "\$ticket" --remote "\$INPUT_REMOTE" --json', script)
    assert re.search(
        r'exec cairn run "\$plan" --ticket "\$ticket" --remote "\$INPUT_REMOTE"', script
    )
    assert re.search(r'exec cairn resume "\$ticket" --remote "\$INPUT_REMOTE" --takeover', script)
    text = (ROOT / "docs" / "ci.md").read_text()
    for command in (
        "cairn catchup TICKET --remote REMOTE --json",
        "cairn run PLAN --ticket TICKET --remote REMOTE",
        "cairn resume TICKET --remote REMOTE --takeover",
    ):
        assert command in text


def test_the_example_workflow_uses_the_action_as_documented() -> None:
    (workflow, permissions) = blocks("ci.md", "yaml")
    loaded = yaml.safe_load(workflow)
    assert loaded["permissions"] == yaml.safe_load(permissions)["permissions"]
    assert loaded["permissions"] == {
        "contents": "write",
        "issues": "write",
        "pull-requests": "write",
    }
    steps = loaded["jobs"]["run"]["steps"]
    (used,) = [s for s in steps if str(s.get("uses", "")).endswith("/cairn@main")]
    assert set(used["with"]) <= set(documented_inputs())
    (opening,) = [s for s in steps if "gh pr create" in s.get("run", "")]
    assert opening["if"] == "success()" and "${{" not in opening["run"]
    assert '--head "$BRANCH"' in opening["run"] and "steps.cairn.outputs.branch" in str(opening)


# --- the steps' scripts, run -------------------------------------------------------------------

STAND_IN = """#!/bin/sh
echo "$(basename "$0") $*" >> "$CALLS"
if [ "$1" = catchup ]; then echo "{\\"ticket\\": \\"$2\\", \\"state\\": \\"$STATE\\"}"; fi
if [ "$1 $2" = "config show" ]; then cat "$CONFIG_ROWS"; fi
exit 0
"""


def step_env(found: dict[str, Any], given: dict[str, str]) -> dict[str, str]:
    """The step's ``env:`` as the runner resolves it: each ``${{ inputs.X }}`` the input given,
    else its default (``${{ github.token }}``: a token)."""
    inputs = action()["inputs"]
    env = {}
    for key, value in (found.get("env") or {}).items():
        (expression,) = EXPRESSION.findall(value)
        name = expression.removeprefix("inputs.")
        assert expression.startswith("inputs."), expression
        default = str(inputs[name].get("default", ""))
        env[key] = given.get(name, "token" if default == "${{ github.token }}" else default)
    return env


def run_step(
    tmp_path: Path, found: dict[str, Any], given: dict[str, str], event: dict[str, Any], **more: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``found``'s script as the runner does (``bash --noprofile --norc -eo pipefail``) in
    a clone, with stand-in ``cairn`` and ``npm`` programs that record how they were called."""
    repo = tmp_path / "repo"
    if not repo.exists():
        make_repo(repo)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for program in ("cairn", "npm"):
        (bin_dir / program).write_text(STAND_IN)
        (bin_dir / program).chmod(0o755)
    if not (bin_dir / "python").exists():
        (bin_dir / "python").symlink_to(sys.executable)
    (tmp_path / "event.json").write_text(json.dumps(event))
    calls = tmp_path / "calls"
    calls.write_text("")
    script = tmp_path / "step.sh"
    script.write_text(found["run"])
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": os.environ["HOME"],
        "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "RUNNER_TEMP": str(tmp_path),
        "CALLS": str(calls),
        "STATE": "none",
        "CONFIG_ROWS": str(tmp_path / "rows.json"),
        **step_env(found, given),
        **more,
    }
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done, calls.read_text().splitlines()


ISSUE = {
    "action": "labeled",
    "issue": {"number": 7, "title": "Greet $(touch pwned) `id`", "body": "- [ ] Say hi\n"},
}


def test_a_ticket_the_remote_does_not_hold_is_run_from_the_issue(tmp_path: Path) -> None:
    done, calls = run_step(tmp_path, step("run"), {}, ISSUE)
    assert done.returncode == 0, done.stderr
    plan = tmp_path / "cairn-plan-GH-7.md"
    assert calls == [
        "cairn catchup GH-7 --remote origin --json",
        f"cairn run {plan} --ticket GH-7 --remote origin",
    ]
    assert plan.read_text() == "# Plan: Greet $(touch pwned) `id`\n\n- [ ] Say hi\n\n"
    assert not (tmp_path / "repo" / "pwned").exists()
    assert (tmp_path / "output").read_text() == "branch=cairn/GH-7\n"


def test_the_inputs_reach_the_run_as_options(tmp_path: Path) -> None:
    given = {
        "plan": "plans/p.md",
        "ticket": "T-9",
        "agent": "codex",
        "max-turns": "12",
        "max-cost-usd": "2.5",
        "remote": "shared",
    }
    done, calls = run_step(tmp_path, step("run"), given, {"ref": "refs/heads/main"})
    assert done.returncode == 0, done.stderr
    assert calls[-1] == (
        "cairn run plans/p.md --ticket T-9 --remote shared --agent codex --max-turns 12 "
        "--max-cost-usd 2.5"
    )


@pytest.mark.parametrize("state", ["interrupted", "needs_input", "stale", "in_progress"])
def test_a_ticket_the_remote_holds_unfinished_is_resumed(tmp_path: Path, state: str) -> None:
    done, calls = run_step(tmp_path, step("run"), {"max-turns": "3"}, ISSUE, STATE=state)
    assert done.returncode == 0, done.stderr
    assert calls == [
        "cairn catchup GH-7 --remote origin --json",
        "cairn resume GH-7 --remote origin --takeover --max-turns 3",
    ]


def test_a_done_ticket_runs_nothing(tmp_path: Path) -> None:
    done, calls = run_step(tmp_path, step("run"), {}, ISSUE, STATE="done")
    assert done.returncode == 0, done.stderr
    assert calls == ["cairn catchup GH-7 --remote origin --json"]
    assert "cairn: ticket GH-7 is done already; nothing to run" in done.stdout
    assert (tmp_path / "output").read_text() == "branch=cairn/GH-7\nstatus=done\n"


def test_without_an_issue_or_a_ticket_the_step_says_what_to_give(tmp_path: Path) -> None:
    done, calls = run_step(tmp_path, step("run"), {}, {"ref": "refs/heads/main"})
    assert done.returncode == 2 and calls == []
    assert "the event names no issue or pull request; give the action's ticket input" in done.stdout
    done, calls = run_step(tmp_path, step("run"), {"ticket": "T-1"}, {"ref": "refs/heads/main"})
    assert done.returncode == 2 and calls == ["cairn catchup T-1 --remote origin --json"]
    assert "no plan: give the action's plan input" in done.stdout


def test_the_agents_clis_are_installed_for_the_whole_chain(tmp_path: Path) -> None:
    rows = [
        {"key": "agent.kind", "value": "claude-code", "source": "cairn.toml"},
        {"key": "agent.fallback", "value": ["spare"], "source": "cairn.toml"},
        {"key": "agents.spare.kind", "value": "codex", "source": "cairn.toml"},
    ]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    install = step(name="Install the agent's CLI")
    done, calls = run_step(tmp_path, install, {}, ISSUE)
    assert done.returncode == 0, done.stderr
    assert calls == [
        "cairn config show --json",
        "npm install -g --no-fund --no-audit @anthropic-ai/claude-code",
        "npm install -g --no-fund --no-audit @openai/codex",
    ]
    (tmp_path / "rows.json").write_text(json.dumps(rows[:1]))
    done, calls = run_step(tmp_path, install, {"agent": "scripted"}, ISSUE)
    assert calls == ["cairn config show --json"]
    assert "cairn: the scripted agent needs no CLI installed" in done.stdout


def test_a_runner_without_a_git_identity_gets_one(tmp_path: Path) -> None:
    done, _ = run_step(tmp_path, step(name="Set a git identity"), {}, ISSUE)
    assert done.returncode == 0, done.stderr
    repo = tmp_path / "repo"
    assert git(repo, "config", "--global", "user.name").strip() == "github-actions[bot]"
    # one already set is kept
    git(repo, "config", "user.name", "Someone")
    run_step(tmp_path, step(name="Set a git identity"), {}, ISSUE)
    assert git(repo, "config", "user.name").strip() == "Someone"
