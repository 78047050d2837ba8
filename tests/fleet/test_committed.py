"""``cairn fleet start`` refuses to start while the configuration a ticket's run reads from its
worktree is not committed (docs/fleet.md, "Configuration is read from the commit"): worktrees
are made from a commit, so the change would be in none of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.fleet_setup import agent_env, fleet_repo
from helpers import assert_one_line_error, cairn, git, make_repo, tree_state


def refused(repo: Path, *args: str) -> str:
    before = tree_state(repo)
    result = cairn("fleet", "start", "--once", *args, cwd=repo)
    assert_one_line_error(result, 2)
    assert "and every ticket's worktree is made from that commit" in result.stderr
    assert not (repo / ".git" / "cairn" / "fleet").exists()  # nothing started, nothing written
    assert not (repo.parent / "repo.cairn").exists()
    assert tree_state(repo) == before
    return result.stderr


def test_a_modified_cairn_toml(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"A-1": 1})
    config = repo / "cairn.toml"
    config.write_text(config.read_text().replace("max_turns = 3", "max_turns = 4"))
    said = refused(repo)
    assert said.startswith("cairn: error: cairn.toml: a change not committed on HEAD")
    assert "commit it (git add cairn.toml && git commit) or undo it" in said
    git(repo, "add", "cairn.toml")  # staged is not committed
    refused(repo)
    git(repo, "commit", "-q", "-m", "four turns")
    result = cairn("fleet", "start", "--once", cwd=repo, env=agent_env(tmp_path))
    assert result.returncode == 0, (result.stdout, result.stderr)


def test_an_untracked_cairn_toml(tmp_path: Path) -> None:
    committed = fleet_repo(tmp_path / "template", {"A-1": 1})
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n"})
    (repo / "cairn.toml").write_text((committed / "cairn.toml").read_text())
    said = refused(repo)
    assert said.startswith("cairn: error: cairn.toml: a change not committed on HEAD")


def test_an_ignored_cairn_toml_and_an_untracked_prompt_override(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"A-1": 1})
    git(repo, "rm", "-q", "--cached", "cairn.toml")
    (repo / ".gitignore").write_text("cairn.toml\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore the config")
    (repo / ".cairn" / "prompts").mkdir(parents=True)
    (repo / ".cairn" / "prompts" / "dispatch.md").write_text("Do $task_title.\n")
    said = refused(repo)
    assert ".cairn/prompts/dispatch.md, cairn.toml: changes not committed on HEAD" in said


def test_an_untracked_agent_script_with_the_dashboard(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {"cairn.toml": '[agent]\nkind = "scripted"\nscript = "agent/script.json"\n'},
    )
    (repo / "agent").mkdir()
    (repo / "agent" / "script.json").write_text('{"coder": []}\n')
    said = refused(repo, "--port", "0")
    assert said.startswith("cairn: error: agent/script.json: a change not committed on HEAD")


@pytest.mark.parametrize("how", ["command", "base"])
def test_a_script_named_by_the_agent_command_or_a_base_branch(tmp_path: Path, how: str) -> None:
    repo = fleet_repo(tmp_path, {"A-1": 1})
    config = repo / "cairn.toml"
    if how == "command":
        text = config.read_text()
        start = text.index("command = ")
        end = text.index("\n", start)
        config.write_text(text[:start] + 'command = ["python3", "tools/agent.py"]' + text[end:])
        git(repo, "commit", "-q", "-am", "a command in the repository")
        (repo / "tools").mkdir()
        (repo / "tools" / "agent.py").write_text("print('hi')\n")
        said = refused(repo)
        assert said.startswith("cairn: error: tools/agent.py: a change not committed on HEAD")
    else:  # the worktrees start from [fleet] base: a change committed elsewhere is not there
        git(repo, "branch", "release")
        config.write_text(config.read_text() + 'base = "release"\n')
        git(repo, "commit", "-q", "-am", "start from release")
        said = refused(repo)
        assert said.startswith("cairn: error: cairn.toml: a change not committed on branch")
