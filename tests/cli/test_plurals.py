"""Counts in words (issue 22): ``1 task``, ``2 tasks``, never ``1 ticket(s)`` or ``1 files``,
across the lines of wip, catchup, status and fleet prune (``cairn.util.text.counted``)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from cairn.cli.display import Display
from cairn.util.text import counted
from helpers import cairn, git, write


@pytest.mark.parametrize(
    ("count", "noun", "plural", "said"),
    [
        (0, "task", None, "0 tasks"),
        (1, "task", None, "1 task"),
        (2, "task", None, "2 tasks"),
        (1, "dispatch", "dispatches", "1 dispatch"),
        (3, "dispatch", "dispatches", "3 dispatches"),
    ],
)
def test_counted(count: int, noun: str, plural: str | None, said: str) -> None:
    assert counted(count, noun, plural) == said


def test_wip_lines_count_in_words(repo: Path, tmp_path: Path) -> None:
    write(repo, "one.txt", "1\n")
    assert cairn("wip", "save", "--ticket", "A", cwd=repo).stdout.startswith(
        "saved 1 changed file to refs/cairn/wip/A"
    )
    write(repo, "two.txt", "2\n")
    write(repo, "three.txt", "3\n")
    assert cairn("wip", "save", "--ticket", "A", cwd=repo).stdout.startswith(
        "saved 3 changed files to refs/cairn/wip/A"
    )
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    pushed = cairn("wip", "push", str(remote), cwd=repo)
    assert pushed.stdout.startswith("pushed 1 snapshot ref to "), pushed.stdout
    pruned = cairn("wip", "prune", "--older-than", "0s", "--dry-run", cwd=repo)
    assert "would prune 1 ticket older than 0s, kept 0" in pruned.stdout, pruned.stdout
    write(repo, ".gitignore", "one.txt\n")  # an ignored file no snapshot holds, in the way
    write(repo, "one.txt", "changed, and ignored now\n")
    dry = cairn("wip", "restore", "A", "--dry-run", "--json", cwd=repo)
    (warning,) = [w for w in json.loads(dry.stdout)["warnings"] if "would refuse" in w]
    assert "a restore would refuse: 1 path that no snapshot holds" in warning
    refused = cairn("wip", "restore", "A", cwd=repo)
    assert refused.returncode == 1
    assert "restore would overwrite 1 path that no snapshot holds" in refused.stderr


def test_the_run_s_lines_count_turns_in_words() -> None:
    display = Display("plain")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        display.event("dispatch_started", dispatch=1, role="coder", max_turns=1)
        display.event("dispatch_finished", dispatch=1, reason="max_turns", turns=1, usage={})
        display.event("dispatch_started", dispatch=2, role="coder", max_turns=3)
    lines = out.getvalue().splitlines()
    assert lines[0] == "dispatch 1: coder, up to 1 turn"
    assert lines[1].startswith("dispatch 1 ended: max_turns after 1 turn")
    assert lines[2] == "dispatch 2: coder, up to 3 turns"
