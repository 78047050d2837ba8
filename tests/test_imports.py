"""The import guard: the commands agents and hooks run per tool call or per task import no Typer,
Click, Rich, pydantic or MCP SDK. Each runs for real in a subprocess under ``-X importtime``,
which lists every module imported; timings are the benchmarks' business, not this test's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers import begin_run, git, write

if TYPE_CHECKING:
    from cairn.state.runstate import RunRef

HEAVY = ("typer", "click", "rich", "pydantic", "pydantic_core", "mcp")
ENGINE = ("cairn.wip.saving", "cairn.wip.hashcache")  # the snapshot engine: only a save needs it
# Commands that run no git but one ``rev-parse``, started with ``os.posix_spawn``: importing
# ``subprocess`` (several milliseconds of a command's ~40) is a regression there.
NO_SUBPROCESS = ("task", "gate", "defer", "finding", "heartbeat", "post-tool-use")


def imported(
    args: list[str], cwd: Path, env: dict[str, str], stdin: bytes = b""
) -> tuple[set[str], str]:
    """The modules ``cairn <args>`` imports, and what it printed; the command must succeed."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cairn", *args],
        cwd=cwd,
        env={**os.environ, **env},
        input=stdin,
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    lines = result.stderr.decode().splitlines()
    names = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}
    assert "cairn.cli.main" in names  # the log is complete: it saw the entry point
    return names, result.stdout.decode()


def heavy(names: set[str]) -> list[str]:
    return sorted(n for n in names if n.split(".")[0] in HEAVY)


@pytest.fixture
def workspace(repo: Path) -> Iterator[tuple[Path, RunRef, Path]]:
    """A repository on branch T-1 with a run in progress, a review run, dirty files and a
    transcript that puts the budget under pressure."""
    git(repo, "checkout", "-q", "-b", "T-1")
    ref, lease = begin_run(repo, "T-1", ["One", "Two", "Three"])
    _, review_lease = begin_run(repo, "R-1", ["Null check"], review=True)
    write(repo, "README.md", "changed\n")
    write(repo, "new/file.txt", "new\n")
    transcript = repo / ".git" / "transcript.jsonl"
    transcript.write_text(
        "".join(
            json.dumps({"type": "assistant", "message": {"id": f"m{i}"}}) + "\n" for i in range(9)
        )
    )
    yield repo, ref, transcript
    lease.release()
    review_lease.release()


HOT = [
    (["task", "start", "0"], "run"),
    (["task", "done", "0", "--files", "a.py", "--outcome", "works", "--json"], "run"),
    (["task", "skip", "1", "--notes", "not needed"], "run"),
    (["task", "defer", "2", "--notes", "later"], "run"),
    (["gate", "Tests", "--result", "pass", "--command", "pytest"], "run"),
    (["defer", "an item"], "run"),
    (["finding", "F1", "--status", "FIXED", "--action", "guarded", "-t", "R-1"], ""),
    (["catchup"], ""),
    (["catchup", "--json"], ""),
    (["catchup", "R-1", "--format", "context"], ""),
    (["status"], ""),
    (["status", "--json"], ""),
    (["wip", "save", "--reason", "guard"], ""),
    (["wip", "save", "--json"], ""),
    (["hook", "claude", "heartbeat"], "hook"),
    (["hook", "claude", "snapshot", "--reason", "stop"], "hook"),
    (["hook", "claude", "session-start"], "hook"),
    (["hook", "claude", "post-tool-use"], "pressure"),
]


def test_hot_commands_import_no_heavy_module(workspace: tuple[Path, RunRef, Path]) -> None:
    repo, ref, transcript = workspace
    payload = json.dumps({"cwd": str(repo), "transcript_path": str(transcript)}).encode()
    envs = {
        "": {},
        "run": {"CAIRN_RUN_DIR": str(ref.run_dir)},
        "hook": {"CAIRN_DEBUG": "1"},  # a hook mutes its stderr, and with it the import log
        "pressure": {
            "CAIRN_RUN_DIR": str(ref.run_dir),
            "CAIRN_MAX_TURNS": "10",
            "CAIRN_PRESSURE_TURNS": "2",
        },
    }
    found = {}
    printed = {}
    for args, env in HOT:
        names, printed[args[-1]] = imported(
            args, repo, envs[env], payload if args[0] == "hook" else b""
        )
        needless = heavy(names)
        if not (args[0] == "wip" or args[-2:] == ["--reason", "stop"]):  # no save: no engine
            needless += [n for n in ENGINE if n in names]
        if args[0] in NO_SUBPROCESS or args[2:3] in (["heartbeat"], ["post-tool-use"]):
            needless += [n for n in ("subprocess",) if n in names]
        if needless:
            found[" ".join(args)] = needless
    assert found == {}
    assert "additionalContext" in printed["post-tool-use"]  # each did its real work
    assert "additionalContext" in printed["session-start"]


def test_the_guard_sees_heavy_imports(repo: Path) -> None:
    """The other commands load Typer, which the guard would report; a save loads the engine
    and ``subprocess``."""
    names = imported(["wip", "save"], repo, {})[0]
    assert set(ENGINE) <= names and "subprocess" in names
    assert "typer" in heavy(imported(["wip", "list"], repo, {})[0])
    assert "typer" in heavy(imported(["task", "done", "--help"], repo, {})[0])
