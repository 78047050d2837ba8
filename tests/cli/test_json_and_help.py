"""The command line's surface: every command takes ``--json``, and under it an error is one JSON
object on stdout with the exit code it has without ``--json`` and nothing on stderr; ``--help``
shows flags as flags and choices as their values."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cairn.agents import ADAPTERS
from cairn.cli.commands import COMMANDS, GROUPS, HIDDEN
from cairn.cli.main import run
from helpers import CliResult, cairn, save, write

# Machine protocols, not commands for people or scripts: the MCP server speaks JSON-RPC on
# stdio and the hooks answer Claude Code in its own format.
NO_JSON = {("mcp",), ("hook", "claude", "post-tool-use"), ("hook", "claude", "session-start")}
NO_JSON |= {("hook", "claude", "snapshot"), ("hook", "claude", "heartbeat")}


def helped(words: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> str:
    """``cairn <words> --help``, run in this process: exit 0, nothing on stderr."""
    assert run(words, COMMANDS[words], ["--help"], [*words, "--help"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


@pytest.mark.parametrize("words", sorted(COMMANDS), ids=" ".join)
def test_help_of_every_command_shows_flags_as_flags(
    words: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    text = helped(words, capsys)
    assert text.startswith(f"usage: cairn {' '.join(words)} ")
    assert ("--json" in text) == (words not in NO_JSON)
    options = text.split("\noptions:\n", 1)[1]
    for flag in ("--json", "--dry-run", "--follow", "--force", "--keep", "--once"):
        for line in options.splitlines():
            if re.search(rf"(^|, ){flag}( |,|$)", line.strip()):
                # the flag's names, then its help: no metavar
                assert re.match(rf"\s+(-\w, )?{flag}(  |$)", line), line


def test_every_group_lists_its_commands() -> None:
    root = cairn("--help")
    assert root.returncode == 0 and root.stderr == ""
    for words in GROUPS:
        helped_group = cairn(*words, "--help")
        assert helped_group.returncode == 0, helped_group.stderr
        assert cairn(*words).stdout == helped_group.stdout  # no command: the help
        below = {key[len(words)] for key in COMMANDS if key[: len(words)] == words}
        listing = helped_group.stdout.split("\ncommands:\n", 1)[1]
        shown = {line.split()[0] for line in listing.splitlines()}
        hidden = {k[len(words)] for k in HIDDEN if len(k) > len(words) and k[: len(words)] == words}
        assert shown == below - hidden
    assert "hook " not in root.stdout and "wip " in root.stdout


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        (("catchup",), "--format <text|context>"),
        (("gate",), "--result <pass|fail>"),
        (("ac",), "--result <pass|fail>"),
        (("finding",), "--status <FIXED|NOT_FIXED|ALREADY_RESOLVED>"),
        (("run",), f"--agent <{'|'.join(ADAPTERS)}|NAME>"),
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
    (["wip", "save", "--timeout-ms", "0"], "0 is not in the range x>=1"),
    (["status", "--json=yes"], "Option '--json' does not take a value"),
    (["status", "extra"], "Got unexpected extra argument (extra)"),
    (["wip", "bogus"], "No such command 'bogus'"),
    (["--bogus"], "No such option: --bogus"),
    (["task", "start", "1"], "no run in progress"),
    (["config", "show", "-C", "/nonexistent/x"], "not a directory"),
    (["hooks", "install", "vim"], "unknown agent 'vim'"),
    (["run", "missing-plan.md"], "missing-plan.md"),
]


@pytest.mark.parametrize(
    ("args", "says"), BAD, ids=lambda v: " ".join(v) if isinstance(v, list) else ""
)
def test_errors_under_json_are_an_object_on_stdout(repo: Path, args: list[str], says: str) -> None:
    plain = cairn(*args, cwd=repo)
    assert plain.returncode in (1, 2) and plain.stdout == ""
    (line,) = plain.stderr.splitlines()
    error = error_of(cairn(*args, "--json", cwd=repo), plain.returncode)
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
