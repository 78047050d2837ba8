"""The command line's surface: every command takes ``--json``, and under it an error is one JSON
object on stdout with the exit code it has without ``--json`` and nothing on stderr; ``--help``
shows flags as flags and choices as their values."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from cairn.agents import ADAPTERS
from cairn.cli.app import app
from helpers import CliResult, cairn, save, write

ROOT = typer.main.get_command(app)
# Machine protocols, not commands for people or scripts: the MCP server speaks JSON-RPC on
# stdio and the hooks answer Claude Code in its own format.
NO_JSON = {("mcp",), ("hook", "claude", "post-tool-use"), ("hook", "claude", "session-start")}
NO_JSON |= {("hook", "claude", "snapshot"), ("hook", "claude", "heartbeat")}


def leaves(
    command: Any = ROOT, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    subcommands = getattr(command, "commands", None)
    if subcommands is None:
        yield path, command
        return
    for name, sub in subcommands.items():
        yield from leaves(sub, (*path, name))


TREE = dict(leaves())


def test_every_command_takes_json() -> None:
    missing = [
        " ".join(path)
        for path, command in TREE.items()
        if path not in NO_JSON and "--json" not in {o for p in command.params for o in p.opts}
    ]
    assert missing == []
    assert set(NO_JSON) <= set(TREE)


@pytest.mark.parametrize("path", sorted(TREE), ids=" ".join)
def test_help_shows_flags_as_flags_and_choices_as_values(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    lines = result.output.splitlines()
    for param in TREE[path].params:
        if getattr(param, "is_flag", False):
            names = ", ".join(sorted(param.opts, key=len))  # "-f, --follow" or "--json"
            if param.secondary_opts:  # "--wait / --no-wait"
                names += " / " + ", ".join(param.secondary_opts)
            (line,) = [ln for ln in lines if ln.strip().startswith(names + " ")]
            # the flag's names, then its help: no metavar
            assert line.strip()[len(names) :].startswith("  "), line


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        (("catchup",), "--format <text|context>"),
        (("gate",), "--result <pass|fail>"),
        (("ac",), "--result <pass|fail>"),
        (("finding",), "--status <FIXED|NOT_FIXED|ALREADY_RESOLVED>"),
        (("run",), f"--agent <{'|'.join(ADAPTERS)}>"),
        (("wip", "prune"), "--older-than <duration>"),
    ],
)
def test_help_lists_the_choices(path: tuple[str, ...], shown: str) -> None:
    result = cairn(*path, "--help")
    assert result.returncode == 0 and shown in result.stdout


def error_of(result: CliResult, code: int) -> dict[str, Any]:
    """The error object of a failed ``--json`` command: alone on stdout, one line."""
    assert result.returncode == code, (result.stdout, result.stderr)
    assert result.stderr == ""
    assert result.stdout.count("\n") == 1
    payload = json.loads(result.stdout)
    assert set(payload) == {"error"}
    error: dict[str, Any] = payload["error"]
    assert set(error) == {"message", "problem", "fix", "exit_code"}
    assert error["exit_code"] == code
    return error


BAD = [
    (["status", "--bogus"], "No such option: --bogus"),
    (["wip", "list", "--limit", "-1"], "--limit"),
    (["wip", "prune", "--older-than", "5"], "'5' has no unit"),
    (["wip", "show", "NOPE"], "NOPE"),
    (["wip", "diff", "NOPE"], "NOPE"),
    (["catchup", "../x"], "invalid ticket id"),
    (["catchup", "--format", "yaml"], "'yaml' is not one of 'text', 'context'"),
    (["gate", "Tests", "--result", "maybe"], "'maybe' is not one of 'pass', 'fail'"),
    (["gate", "Tests"], "--result is missing"),
    (["task", "done"], "Missing argument"),
    (["task", "start", "1"], "no run in progress"),
    (["config", "show", "-C", "/nonexistent/x"], "not a directory"),
    (["hooks", "install", "vim"], "unknown agent 'vim'"),
    (["run", "missing-plan.md"], "missing-plan.md"),
]


@pytest.mark.parametrize(
    ("args", "says"), BAD, ids=lambda v: " ".join(v) if isinstance(v, list) else ""
)
@pytest.mark.parametrize("fast", ["1", "0"])
def test_errors_under_json_are_an_object_on_stdout(
    repo: Path, args: list[str], says: str, fast: str
) -> None:
    env = {"CAIRN_FAST": fast}
    plain = cairn(*args, cwd=repo, env=env)
    assert plain.returncode in (1, 2) and plain.stdout == ""
    (line,) = plain.stderr.splitlines()
    error = error_of(cairn(*args, "--json", cwd=repo, env=env), plain.returncode)
    assert says in error["message"]
    assert line == f"cairn: error: {error['message']}"
    problem, _, fix = error["message"].partition("; ")
    assert (error["problem"], error["fix"]) == (problem, fix or None)


def test_after_a_double_dash_json_is_an_argument(repo: Path) -> None:
    result = cairn("defer", "--", "--json", cwd=repo)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("cairn: error: ")


def test_wip_diff_json(repo: Path) -> None:
    write(repo, "README.md", "changed\n")
    save(repo, "T-1")
    result = cairn("wip", "diff", "T-1", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["a"] == "T-1" and data["b"] is None and data["stat"] is False
    assert data["diff"] == cairn("wip", "diff", "T-1", cwd=repo).stdout
    assert "+changed" in data["diff"]
    stat = json.loads(cairn("wip", "diff", "T-1", "--stat", "--json", cwd=repo).stdout)
    assert stat["stat"] is True and "README.md" in stat["diff"]


def test_hooks_install_and_uninstall_json(repo: Path) -> None:
    installed = cairn("hooks", "install", "claude", "--local", "--json", cwd=repo)
    assert installed.returncode == 0, installed.stderr
    data = json.loads(installed.stdout)
    assert data["scope"] == "local" and data["changed"] is True
    assert data["path"] == str(repo / ".claude" / "settings.local.json")
    assert {c["action"] for c in data["changes"]} == {"added"}
    assert all(c["event"] and c["command"] for c in data["changes"])
    again = json.loads(cairn("hooks", "install", "claude", "--local", "--json", cwd=repo).stdout)
    assert again["changed"] is False
    removed = cairn("hooks", "uninstall", "claude", "--local", "--json", cwd=repo)
    assert removed.returncode == 0, removed.stderr
    assert {c["action"] for c in json.loads(removed.stdout)["changes"]} == {"removed"}


def test_the_documented_error_object_is_what_cairn_prints(repo: Path) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    (example,) = [line for line in doc.splitlines() if line.startswith('{"error": ')]
    result = cairn("wip", "prune", "--older-than", "5", "--json", cwd=repo)
    assert result.stdout == example + "\n"
