"""The safety net never depends on a config file (issue 12, defect 12): with a ``cairn.toml``
that does not parse, ``cairn wip save`` and the Claude Code snapshot hook refused to snapshot.
They now snapshot with the default settings and say why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import cairn, git, write
from integrations.hook_calls import payload, run_hook

BROKEN = {
    "not-toml": b"[agent\nkind = \n",
    "binary": b"\x00\x01\xff",
    "misspelt-phase": b'[loop]\nphases = ["implement", "reveiw"]\n',
    "unknown-key": b"[snapshot]\nmax_new_filez = 3\n",
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_wip_save_snapshots_with_defaults_and_warns(repo: Path, case: str) -> None:
    write(repo, "cairn.toml", BROKEN[case])
    write(repo, "work.txt", "unsaved\n")
    result = cairn("wip", "save", "--ticket", "T-1", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    saved = json.loads(result.stdout)
    assert saved["created"] and saved["ref"] == "refs/cairn/wip/T-1"
    assert any("cairn.toml" in w and "default settings" in w for w in saved["warnings"])
    files = git(repo, "ls-tree", "-r", "--name-only", saved["commit"]).split()
    assert "work.txt" in files
    human = cairn("wip", "save", "--ticket", "T-2", cwd=repo)
    assert human.returncode == 0 and "warning:" in human.stdout and "cairn.toml" in human.stdout


def test_a_directory_where_the_config_belongs_does_not_stop_a_snapshot(repo: Path) -> None:
    (repo / "cairn.toml").mkdir()
    write(repo, "cairn.toml/inner", "x\n")
    result = cairn("wip", "save", "--ticket", "T-1", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["created"]


def test_the_claude_snapshot_hook_saves_despite_a_broken_config(repo: Path) -> None:
    write(repo, "cairn.toml", BROKEN["not-toml"])
    write(repo, "work.txt", "unsaved\n")
    done = run_hook("snapshot --reason stop", payload("Stop", repo), repo)
    assert done.returncode == 0 and done.stdout == b""
    commit = git(repo, "rev-parse", "refs/cairn/wip/main").strip()
    assert "work.txt" in git(repo, "ls-tree", "-r", "--name-only", commit).split()
