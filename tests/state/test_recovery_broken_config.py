"""Recovery never depends on the config (issue 22, item 14): with a ``cairn.toml`` an agent has
clobbered, ``wip restore``, ``wip list``, ``wip show``, ``catchup`` and ``status`` refused (exit
2). They now work with the default settings and say so: in the output where it has a place for
warnings (``catchup``, ``wip restore``, and their ``--json``), else as a ``cairn: warning:`` line
on stderr (``status``, ``wip list``, ``wip show``), as ``wip save`` and the hooks already did.
``cairn run`` and ``cairn config show`` still refuse such a file (tests/corpus, configs.yaml)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cairn.state import runstate
from helpers import begin_run, cairn, git, write
from integrations.hook_calls import aged_marker, payload, run_hook

# Each shape an agent (or a bad merge) leaves a config in, and a word of cairn's reason.
BROKEN: dict[str, tuple[str, object]] = {
    "not-toml": ("cairn.toml", b"[agent\nkind = \n"),
    "binary": ("cairn.toml", b"\x00\x01[agent]\n"),
    "not-utf8": ("cairn.toml", b"[agent]\nkind = '\xff\xfe'\n"),
    "misspelt-phase": ("cairn.toml", b'[loop]\nphases = ["implement", "reveiw"]\n'),
    "unknown-key": ("cairn.toml", b"[snapshot]\nmax_new_filez = 3\n"),
    "wrong-type": ("cairn.toml", b"[marker]\nstale_after = 5\n"),
    "too-large": ("cairn.toml", b"# x\n" * 300_000),
    "directory": ("cairn.toml", "dir"),
    "dangling-symlink": ("cairn.toml", "dangling"),
    "pyproject-bad-table": ("pyproject.toml", b"[tool]\ncairn = 3\n"),
}


# status meets every shape; the other commands read the config through the same loader
# (cairn.config.load with warnings), so three different failures of it stand for the rest.
SOME = ("not-toml", "dangling-symlink", "pyproject-bad-table")


def clobber(repo: Path, case: str) -> str:
    """Break the config as ``case`` says; the name of the broken file."""
    name, content = BROKEN[case]
    path = repo / name
    if content == "dir":
        path.mkdir()
        write(path, "inner", "x\n")
    elif content == "dangling":
        path.symlink_to(repo.parent / "nowhere.toml")
    else:
        assert isinstance(content, bytes)
        path.write_bytes(content)
    return name


def said_defaults(text: str, name: str) -> bool:
    return any(name in line and "default settings" in line for line in text.splitlines())


@pytest.fixture
def ready(repo: Path) -> Path:
    """A repository with a snapshot of ticket T-1 and an interrupted run of ticket main."""
    write(repo, "src/app.py", "print('work in progress')\n")
    saved = cairn("wip", "save", "--ticket", "T-1", "--json", cwd=repo)
    assert saved.returncode == 0, saved.stderr
    git(repo, "checkout", "--", "src/app.py")
    ref, lease = begin_run(repo, "main", ["Add the parser", "Wire it up"])
    runstate.interrupt(ref, lease, "signal")
    return repo


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_status_lists_the_tickets_and_warns_on_stderr(ready: Path, case: str) -> None:
    name = clobber(ready, case)
    for args in (["status"], ["status", "--json"]):
        done = cairn(*args, cwd=ready)
        assert done.returncode == 0, done.stderr
        assert "T-1" in done.stdout and "main" in done.stdout
        (line,) = done.stderr.splitlines()
        assert line.startswith("cairn: warning: ") and said_defaults(line, name)
    rows = json.loads(cairn("status", "--json", cwd=ready).stdout)
    assert {row["ticket"]: row["state"] for row in rows} == {"T-1": "none", "main": "interrupted"}


@pytest.mark.parametrize("case", SOME)
def test_catchup_reports_the_run_with_a_warning(ready: Path, case: str) -> None:
    name = clobber(ready, case)
    human = cairn("catchup", cwd=ready)
    assert human.returncode == 0, human.stderr
    assert "ticket main: interrupted" in human.stdout and said_defaults(human.stdout, name)
    assert "next: cairn resume main" in human.stdout
    report = json.loads(cairn("catchup", "main", "--json", cwd=ready).stdout)
    assert report["state"] == "interrupted" and report["total"] == 2
    assert said_defaults(report["warnings"][0], name)
    other = cairn("catchup", "T-1", cwd=ready)
    assert other.returncode == 0 and "refs/cairn/wip/T-1" in other.stdout


@pytest.mark.parametrize("case", SOME)
def test_wip_list_show_and_restore_work_with_a_warning(ready: Path, case: str) -> None:
    name = clobber(ready, case)
    listed = cairn("wip", "list", cwd=ready)
    assert listed.returncode == 0, listed.stderr
    assert "T-1" in listed.stdout and said_defaults(listed.stderr, name)
    as_json = cairn("wip", "list", "--json", cwd=ready)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)[0]["ticket"] == "T-1"
    assert said_defaults(as_json.stderr, name)
    shown = cairn("wip", "show", "T-1", cwd=ready)
    assert shown.returncode == 0, shown.stderr
    assert "src/app.py" in shown.stdout and said_defaults(shown.stderr, name)
    dry = cairn("wip", "restore", "T-1", "--dry-run", cwd=ready)
    assert dry.returncode == 0 and said_defaults(dry.stdout, name)
    restored = cairn("wip", "restore", "T-1", "--json", cwd=ready)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    result = json.loads(restored.stdout)
    assert "src/app.py" in result["written"] and said_defaults(result["warnings"][0], name)
    assert (ready / "src" / "app.py").read_text() == "print('work in progress')\n"
    assert result["safety_commit"]  # the broken file too: the restore put back T-1's tree


def test_the_heartbeat_hook_beats_despite_a_broken_config(ready: Path) -> None:
    from cairn.state import marker

    path, aged = aged_marker(ready)
    earlier = aged.last_updated
    clobber(ready, "not-toml")
    done = run_hook("heartbeat", payload("PostToolUse", ready), ready)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    now = marker.read(path)
    assert now is not None and now.last_updated > earlier


def test_a_config_that_loads_gives_no_warning(ready: Path) -> None:
    write(ready, "cairn.toml", '[marker]\nstale_after = "2h"\n')
    for args in (["status"], ["wip", "list"], ["catchup"]):
        done = cairn(*args, cwd=ready)
        assert done.returncode == 0 and "warning" not in done.stdout + done.stderr, args
    assert os.path.exists(ready / "cairn.toml")
