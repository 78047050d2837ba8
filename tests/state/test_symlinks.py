"""cairn never follows a symlink in its state, and never writes outside the repository.

Issue 12, defects 1 (a symlinked run directory, ``.git/cairn`` or ``state_dir = "../x"`` made
cairn write outside the repository), 2 (a symlinked journal or lease: exit 1 after the summary
was already rewritten) and 7 (``CAIRN_RUN_DIR`` outside any repository left a ``.lock`` there).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from cairn.errors import BadInput
from cairn.state import lease
from cairn.state.layout import JOURNAL, LEASE, LOCK, Layout
from cairn.state.runstate import RunRef, interrupt
from cairn.terms import ENV_RUN_DIR
from helpers import assert_one_line_error, begin_run, cairn, state_files, untouched_state, write

TITLES = ["Parse", "Wire"]


def everything(directory: Path) -> list[tuple[str, int, int]]:
    """Every entry under ``directory`` with size and mtime (links not followed)."""
    return sorted(
        (str(p.relative_to(directory)), p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in directory.rglob("*")
    )


@pytest.fixture
def stopped_run(repo: Path) -> RunRef:
    """A run of T-1 whose process has let go of it (the marker stays, without a live lease)."""
    ref, held = begin_run(repo, "T-1", TITLES)
    interrupt(ref, held, "signal")
    return ref


def refused_without_writing(
    repo: Path, outside: Path, *args: str, env: dict[str, str] | None = None, says: str
) -> None:
    before, outside_before = untouched_state(repo), everything(outside)
    result = cairn(*args, cwd=repo, env=env)
    assert_one_line_error(result)
    assert says in result.stderr
    assert untouched_state(repo) == before
    assert everything(outside) == outside_before


def test_a_symlinked_run_directory_is_refused(stopped_run: Any, repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    run_dir = stopped_run.run_dir
    shutil.copytree(run_dir, outside / "run")
    shutil.rmtree(run_dir)
    run_dir.symlink_to(outside / "run")
    for args in (
        ("task", "start", "1", "--ticket", "T-1"),
        ("task", "done", "0", "--ticket", "T-1"),
        ("catchup", "T-1"),
        ("resume", "T-1", "--agent", "scripted"),
    ):
        refused_without_writing(repo, outside, *args, says="symlink")
    env = {ENV_RUN_DIR: str(run_dir)}
    refused_without_writing(repo, outside, "task", "start", "1", env=env, says="symlink")


@pytest.mark.parametrize("name", [JOURNAL, LEASE, LOCK, "tickets", "ticket"])
def test_a_symlinked_state_file_or_directory_is_refused_before_anything_is_written(
    stopped_run: Any, repo: Path, tmp_path: Path, name: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    run_dir = stopped_run.run_dir
    ticket_dir = run_dir.parent
    target = {
        JOURNAL: run_dir / JOURNAL,
        LEASE: ticket_dir / LEASE,
        LOCK: ticket_dir / LOCK,
        "tickets": ticket_dir.parent,
        "ticket": ticket_dir,
    }[name]
    moved = outside / "moved"
    shutil.move(target, moved)
    target.symlink_to(moved)
    env = {ENV_RUN_DIR: str(run_dir)}
    if name == LEASE:  # only a run takes the lease
        write(repo, "cairn.toml", '[agent]\nkind = "command"\ncommand = ["true", "{prompt}"]\n')
        plan = write(tmp_path, "plan.md", "### Task 0: One\n")
        refused_without_writing(repo, outside, "run", str(plan), "--ticket", "T-1", says="symlink")
        return
    if name not in ("tickets", "ticket"):
        refused_without_writing(repo, outside, "task", "start", "1", env=env, says="symlink")
    refused_without_writing(repo, outside, "task", "start", "1", "--ticket", "T-1", says="symlink")
    if name != LOCK:  # the lock is only taken for a write
        refused_without_writing(repo, outside, "catchup", "T-1", says="symlink")


def test_a_symlinked_lease_is_bad_input_for_a_new_run(repo: Path, tmp_path: Path) -> None:
    """The lease is opened before anything of the run is written."""
    layout = Layout(repo / ".git" / "cairn")
    ticket_dir = layout.ticket_dir("T-1")
    ticket_dir.mkdir(parents=True)
    (tmp_path / "elsewhere").write_text("")
    (ticket_dir / LEASE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(BadInput, match=r"lease .* is a symlink"):
        lease.acquire(layout, "T-1", stale_after=60)
    assert sorted(p.name for p in ticket_dir.iterdir()) == [LEASE]


def test_a_symlinked_state_root_is_refused(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / ".git" / "cairn").symlink_to(outside)
    plan = write(tmp_path, "plan.md", "### Task 0: One\n")
    for args in (
        ("task", "start", "0", "--ticket", "T-1"),
        ("catchup", "T-1"),
        ("status",),
        ("run", str(plan), "--ticket", "T-1", "--agent", "scripted"),
    ):
        refused_without_writing(repo, outside, *args, says="outside the repository")
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("state_dir", ["../x", ".backlog/../../x", "link/inside"])
def test_a_state_dir_leading_out_of_the_repository_is_refused(
    repo: Path, tmp_path: Path, state_dir: str
) -> None:
    (tmp_path / "x").mkdir()
    (repo / "link").symlink_to(tmp_path / "x")
    write(repo, "cairn.toml", f'state_dir = "{state_dir}"\n')
    plan = write(tmp_path, "plan.md", "### Task 0: One\n")
    for args in (
        ("catchup", "T-1"),
        ("task", "start", "0", "--ticket", "T-1"),
        ("run", str(plan), "--ticket", "T-1", "--agent", "scripted"),
    ):
        refused_without_writing(repo, tmp_path / "x", *args, says="state_dir")
    assert list((tmp_path / "x").iterdir()) == []


def test_state_dir_inside_the_work_tree_or_absolute_is_fine(repo: Path, tmp_path: Path) -> None:
    write(repo, "cairn.toml", 'state_dir = ".backlog/active"\n')
    assert cairn("catchup", cwd=repo).returncode == 0
    assert cairn("status", cwd=repo).returncode == 0
    write(repo, "cairn.toml", f'state_dir = "{tmp_path / "anywhere"}"\n')
    assert cairn("catchup", cwd=repo).returncode == 0
    assert cairn("status", cwd=repo).returncode == 0


def test_a_run_dir_variable_outside_any_repository_writes_nothing(tmp_path: Path) -> None:
    """Defect 7: the report was refused, but only after a ``.lock`` was created there."""
    fake = tmp_path / "tickets" / "T-1" / "20261130-101500Z"
    fake.mkdir(parents=True)
    before = everything(tmp_path)
    for args in (("task", "start", "0"), ("defer", "x"), ("gate", "Tests", "--result", "pass")):
        result = cairn(*args, cwd=tmp_path, env={ENV_RUN_DIR: str(fake)})
        assert_one_line_error(result)
        assert "not a cairn run directory" in result.stderr
    assert everything(tmp_path) == before
    assert state_files(tmp_path) == before
