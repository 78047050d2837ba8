"""A run whose disk fills up stops as a saved, resumable cutoff (issue 12, defect 13).

The repository lives on a real 2 MiB tmpfs; the scripted agent fills it with ``dd``, exactly as
an agent writing a huge file would. Before the fix cairn's next state write failed with ENOSPC
and the run ended with exit 1 (an internal failure); now it is ``Interrupted — disk_full``,
a snapshot is attempted, exit 3, and after space is freed ``cairn resume`` finishes the plan.
Needs ``mount -t tmpfs`` (root); skipped, saying so, where the machine does not allow it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn import summary
from cairn.state.layout import latest_artifact
from helpers import cairn, git, make_repo, small_tmpfs

TICKET = "T-1"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    with small_tmpfs(mount, "2m") as refused:
        if refused:
            pytest.skip(f"cannot mount a small tmpfs here ({refused})")
        yield mount


def test_a_full_disk_is_a_resumable_cutoff(small_disk: Path, tmp_path: Path) -> None:
    script = tmp_path / "agent-script.json"
    script.write_text(
        json.dumps(
            {
                "coder": [
                    [
                        {"cairn": ["task", "start", "1"]},
                        {"write": {"path": "a.txt", "content": "a"}},
                    ],
                    [{"run": "dd if=/dev/zero of=fill bs=64k >/dev/null 2>&1; true"}],
                    [{"cairn": ["task", "done", "1", "--files", "a.txt"]}],
                    [{"cairn": ["task", "done", "2"]}],
                ]
            }
        )
    )
    config = (
        f'[agent]\nkind = "scripted"\nscript = "{script}"\nmax_turns = 8\n'
        'budget_pressure_turns = 1\nmax_continuations = 0\n\n[loop]\nphases = ["implement"]\n'
    )
    repo = make_repo(small_disk / "repo", {"README.md": "hello\n", "cairn.toml": config})
    git(repo, "config", "core.fsync", "none")
    plan = tmp_path / f"{TICKET}.md"
    plan.write_text("### Task 1: One\n\nDo one.\n\n### Task 2: Two\n\nDo two.\n")

    result = cairn("run", str(plan), cwd=repo)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert "disk full" in result.stdout, result.stdout
    assert "interrupted" in result.stdout and f"cairn resume {TICKET}" in result.stdout

    (repo / "fill").unlink()
    report = json.loads(cairn("catchup", TICKET, "--json", cwd=repo).stdout)
    assert report["state"] == "interrupted", report
    assert report["next_command"] == f"cairn resume {TICKET}"
    run_dir = Path(report["run_dir"])
    written = latest_artifact(run_dir, "coder", "change-summary")
    assert written is not None
    loaded = summary.load(written.path)
    assert loaded is not None and loaded.tasks[0].status == "in progress"

    resumed = cairn("resume", TICKET, cwd=repo)
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    final = summary.load(written.path)
    assert final is not None and [t.status for t in final.tasks] == ["completed"] * 2
