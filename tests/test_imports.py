"""The import guard: the commands agents and hooks run per tool call or per task import their own
command module and handler, argparse only when their command line has words to parse (the hooks
have none), and no Rich, pydantic or MCP SDK. Each runs for real in a subprocess under
``-X importtime``, which lists every module imported; timings are the benchmarks' business, not
this test's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cairn.cli.commands import COMMANDS
from cairn.terms import ENV_DEBUG, ENV_MAX_TURNS, ENV_PRESSURE_TURNS, ENV_RUN_DIR
from cairn.wip.proof import RACY_WINDOW_NS
from helpers import begin_run, git, write

if TYPE_CHECKING:
    from cairn.state.runstate import RunRef

HEAVY = ("typer", "click", "rich", "pydantic", "pydantic_core", "mcp")
# What of the command line a command loads: the entry, the table, the parser, the printer.
CLI = {"cairn.cli", "cairn.cli.main", "cairn.cli.commands", "cairn.cli.parsing"}
CLI |= {"cairn.cli.output", "cairn.cli.handlers"}
ENGINE = ("cairn.wip.saving", "cairn.wip.hashcache")  # the snapshot engine: only a save needs it
# What only a save that records needs: a save the no-op proof answers (``cairn wip save``, the Stop
# hook) loads none of it, nor the records library, nor the config when no file holds one.
RECORDING = (
    *("cairn.wip.recording", "cairn.wip.scan", "cairn.wip.treebuild", "cairn.wip.objects"),
    *("cairn.wip.meta", "cairn.wip.models", "cairn.config", "cairn.git.runner"),
    *("msgspec", "yaml", "typing", "pathlib"),
)
# Commands that judge no process's liveness: ``psutil`` there is a regression.
NO_PSUTIL = ("task", "gate", "defer", "finding", "heartbeat", "post-tool-use")
# ...and ``shutil`` (with ``bz2``, ``lzma``, ``zlib``), which argparse's help formatter would load.
NO_SHUTIL = ("task", "gate", "defer", "finding", "heartbeat")
# The heartbeat moves one value of a marker cairn wrote (JSON) in a repository without a config
# file: no records library, no YAML, neither the config's records nor the marker's, and neither
# ``typing`` nor ``datetime`` (the stamp is ``time``'s).
NOT_ON_HEARTBEAT: tuple[str, ...] = (
    "msgspec",
    "yaml",
    "cairn.config.records",
    "cairn.state.marker_records",
)
NOT_ON_HEARTBEAT += ("typing", "datetime")


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
        "run": {ENV_RUN_DIR: str(ref.run_dir)},
        "hook": {ENV_DEBUG: "1"},  # a hook mutes its stderr, and with it the import log
        "pressure": {
            ENV_RUN_DIR: str(ref.run_dir),
            ENV_MAX_TURNS: "10",
            ENV_PRESSURE_TURNS: "2",
        },
    }
    found = {}
    printed = {}
    for args, env in HOT:
        names, printed[args[-1]] = imported(
            args, repo, envs[env], payload if args[0] == "hook" else b""
        )
        needless = heavy(names)
        needless += [n for n in ("inspect", "ast") if n in names]  # cairn/__init__.py
        if not (args[0] == "wip" or args[-2:] == ["--reason", "stop"]):  # no save: no engine
            needless += [n for n in ENGINE if n in names]
        if args[0] in NO_PSUTIL or args[2:3] in (["heartbeat"], ["post-tool-use"]):
            needless += [n for n in ("psutil",) if n in names]
        if args[0] in NO_SHUTIL or args[2:3] == ["heartbeat"]:
            needless += [n for n in ("shutil",) if n in names]
        if not rest(args) and "argparse" in names:  # nothing to parse: the declared defaults
            needless.append("argparse")
        if rest(args):
            assert "argparse" in names  # the guard sees argparse where it is used
        if args[2:3] == ["heartbeat"]:
            needless += [n for n in NOT_ON_HEARTBEAT if n in names]
        module = COMMANDS[tuple(args[: len(args) - len(rest(args))])].target.split(":")[0]
        handler = "cairn.cli.handlers." + module.rsplit(".", 1)[1]
        needless += sorted(
            n for n in names if n.startswith("cairn.cli") and n not in CLI | {module, handler}
        )
        if needless:
            found[" ".join(args)] = needless
    assert found == {}
    assert "additionalContext" in printed["post-tool-use"]  # each did its real work
    assert "additionalContext" in printed["session-start"]


def rest(args: list[str]) -> list[str]:
    """What follows the command's words in ``args``."""
    for size in range(len(args), 0, -1):
        if tuple(args[:size]) in COMMANDS:
            return args[size:]
    raise AssertionError(f"no command in {args}")


def test_msgspec_loads_without_typing_extensions_which_others_still_find() -> None:
    """While msgspec loads it does not find ``typing_extensions`` (``cairn/__init__.py``), so it
    reads annotations with ``typing``'s ``get_type_hints``; whoever imports it afterwards gets
    it, and records validate as before."""
    code = (
        "import sys, cairn, msgspec\n"
        "from cairn.state.marker import Marker\n"
        "print('typing_extensions' in sys.modules, msgspec._utils._get_type_hints.__module__)\n"
        "import typing_extensions, pydantic\n"
        "print(typing_extensions.__name__, cairn._TypingExtensionsNotForMsgspec in sys.meta_path)\n"
        "try:\n"
        "    msgspec.convert({'phase': 'x', 'started_at': 1, 'last_updated': 1}, Marker)\n"
        "except msgspec.ValidationError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "False typing",
        "typing_extensions False",
        "Expected `datetime`, got `int` - at `$.started_at`",
    ]


def test_help_loads_the_command_s_module_alone(repo: Path) -> None:
    """``--help`` of a command declares it and prints: no handler, nothing of the lower layers;
    a group's help reads its commands' declarations only."""
    names = imported(["task", "done", "--help"], repo, {})[0]
    cairn_modules = {n for n in names if n.startswith("cairn")}
    assert cairn_modules == CLI - {"cairn.cli.output", "cairn.cli.handlers"} | {
        "cairn",
        "cairn.terms",
        "cairn.envnames",
        "cairn.cli.commands.progress",
    }
    assert "argparse" in names and heavy(names) == []
    listed = imported(["--help"], repo, {})[0]
    assert heavy(listed) == [] and not any(n.startswith("cairn.cli.handlers") for n in listed)


def test_the_guard_sees_heavy_imports(repo: Path) -> None:
    """A save loads the engine and ``subprocess``; a command that is not per tool call may
    load what it needs (``wip list``: the records' pydantic edge)."""
    names = imported(["wip", "save"], repo, {})[0]
    assert set(ENGINE) <= names and "subprocess" in names
    assert "cairn.cli.commands.fleet" not in names


def test_the_entry_and_the_parser_import_nothing_at_module_level() -> None:
    """``cairn.cli.main`` and ``cairn.cli.parsing`` (and a hook's command module) load no
    ``argparse``, ``typing`` or ``re`` when imported: what a command needs it imports itself."""
    code = (
        "import sys; before = set(sys.modules)\n"
        "import cairn.cli.main, cairn.cli.parsing, cairn.cli.commands.hook\n"
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    loaded = set(result.stdout.split())
    assert "cairn.cli.parsing" in loaded  # measured from before the entry was imported
    assert loaded & {"argparse", "typing", "re", "types"} == set()


def test_the_heartbeat_loads_records_only_for_what_it_must_check(repo: Path) -> None:
    """A hand-written YAML marker is read whole (YAML, the records library) and rewritten as
    JSON; the next beat moves ``last_updated`` in the JSON and loads neither. A config file is
    loaded (its records) for its ``state_dir``."""
    from cairn.state.layout import discover

    path = discover(repo)[2].marker_path("main")
    path.parent.mkdir(parents=True)
    path.write_text("phase: implement\nstarted_at: 2026-11-29\nlast_updated: 2026-11-29\n")
    beat = (["hook", "claude", "heartbeat"], repo, {ENV_DEBUG: "1"})
    payload = json.dumps({"cwd": str(repo), "hook_event_name": "PostToolUse"}).encode()
    first = imported(*beat, payload)[0]
    assert {"yaml", "msgspec", "cairn.state.marker_records"} <= first
    assert json.loads(path.read_text())["last_updated"] != "2026-11-29"  # JSON now
    second = imported(*beat, payload)[0]
    assert [n for n in NOT_ON_HEARTBEAT if n in second] == []
    write(repo, "cairn.toml", "[marker]\nstale_after = '1h'\n")
    configured = imported(*beat, payload)[0]
    assert "cairn.config.records" in configured and "yaml" not in configured


def test_a_no_op_save_answers_before_the_engine_loads(repo: Path) -> None:
    """The save that records loads the engine; the next, which the proof answers (the command
    line's and the Stop hook's), loads none of ``RECORDING``, and moves no ref."""
    write(repo, "notes.md", "draft\n")
    names, printed = imported(["wip", "save"], repo, {})
    assert printed.startswith("saved 1 changed file")
    assert {"cairn.wip.recording", "cairn.config", "msgspec"} <= names  # the guard sees them
    refs = git(repo, "for-each-ref", "refs/cairn/")
    time.sleep(RACY_WINDOW_NS / 1e9 + 0.1)  # past the racy window: the next save keeps a proof
    names, printed = imported(["wip", "save"], repo, {})
    assert printed.startswith("nothing changed since the last snapshot")  # the full path, once
    assert "cairn.wip.recording" in names
    payload = json.dumps({"cwd": str(repo)}).encode()
    for args, env, stdin in [
        (["wip", "save"], {}, b""),
        (["wip", "save", "--reason", "guard"], {}, b""),
        (["hook", "claude", "snapshot", "--reason", "stop"], {ENV_DEBUG: "1"}, payload),
    ]:
        names, printed = imported(args, repo, env, stdin)
        assert sorted(n for n in RECORDING if n in names) == [], args
        assert printed.startswith("nothing changed") or args[0] == "hook"
    assert git(repo, "for-each-ref", "refs/cairn/") == refs
    names, printed = imported(["wip", "save", "--json"], repo, {})  # the result, in full
    assert json.loads(printed)["created"] is False and "msgspec" in names
