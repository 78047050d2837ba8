"""Layout: state root, run ids unique within a second, artifact numbers unique under concurrency."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cairn.config import load
from cairn.errors import BadInput
from cairn.git import Repo
from cairn.state import journal
from cairn.state.layout import Layout, artifacts, is_run_id, run_sort_key
from cairn.state.runstate import RunRef, write_artifact
from helpers import begin_run, git, write

NOON = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def test_default_root_is_in_the_common_git_dir(repo: Path, tmp_path: Path) -> None:
    found = Repo.discover(repo)
    assert Layout.for_repo(found, load(found.toplevel)).root == repo / ".git" / "cairn"
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")
    other = Repo.discover(tmp_path / "wt")
    assert Layout.for_repo(other, load(other.toplevel)).root == repo / ".git" / "cairn"


@pytest.mark.parametrize("absolute", [False, True])
def test_state_dir_moves_the_root(repo: Path, tmp_path: Path, absolute: bool) -> None:
    target = tmp_path / "elsewhere" if absolute else ".backlog/active"
    write(repo, "cairn.toml", f'state_dir = "{target}"\n')
    found = Repo.discover(repo)
    root = Layout.for_repo(found, load(found.toplevel)).root
    assert root == (target if absolute else repo / ".backlog" / "active")
    ref, lease = begin_run(repo, "T-1", ["a"])
    assert ref.run_dir.parent == Path(root) / "tickets" / "T-1"
    assert (Path(root) / "tickets" / "T-1" / ".in-progress.yaml").is_file()
    lease.release()


def test_run_ids_in_the_same_second_are_unique_and_ordered(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "state")
    made = [layout.create_run("T-1", NOON)[0] for _ in range(12)]
    assert made[0] == "20261130-120000Z"
    assert made[1] == "20261130-120000Z-2"
    assert len(set(made)) == 12
    assert layout.list_runs("T-1") == made
    later = layout.create_run("T-1", NOON.replace(second=1))[0]
    assert layout.latest_run("T-1") == later
    assert all(is_run_id(r) for r in made)
    assert run_sort_key("20261130-120000Z-10") > run_sort_key("20261130-120000Z-9")


def _make_runs(root: str, count: int, queue: multiprocessing.Queue) -> None:
    layout = Layout(Path(root))
    queue.put([layout.create_run("T-1", NOON)[0] for _ in range(count)])


def test_run_ids_unique_across_processes(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_make_runs, args=(str(tmp_path), 20, queue)) for _ in range(4)]
    for proc in procs:
        proc.start()
    made = [run for _ in procs for run in queue.get(timeout=60)]
    for proc in procs:
        proc.join()
    assert len(made) == len(set(made)) == 80


def _write_artifacts(root: str, run_id: str, role: str, queue: multiprocessing.Queue) -> None:
    ref = RunRef(Layout(Path(root)), "T-1", run_id)
    queue.put([write_artifact(ref, role, "note", f"{role} {i}\n").name for i in range(15)])


def test_artifact_numbers_unique_under_concurrency(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    run_id, run_dir = layout.create_run("T-1", NOON)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    roles = ["coder", "reviewer", "evaluator"]
    procs = [
        ctx.Process(target=_write_artifacts, args=(str(tmp_path), run_id, role, queue))
        for role in roles
    ]
    for proc in procs:
        proc.start()
    names = [name for _ in procs for name in queue.get(timeout=60)]
    for proc in procs:
        proc.join()
    numbers = sorted(a.number for a in artifacts(run_dir))
    assert numbers == list(range(1, 46))
    assert len(names) == 45
    assert sorted(names) == sorted(a.path.name for a in artifacts(run_dir))


def test_artifact_names_and_companions(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    run_id, run_dir = layout.create_run("T-1", NOON)
    ref = RunRef(layout, "T-1", run_id)
    plan = write_artifact(ref, "orchestrator", "plan", "# plan\n")
    companion = write_artifact(ref, "orchestrator", "plan", "{}", ext="json", number=1)
    assert (plan.name, companion.name) == ("01_orchestrator_plan.md", "01_orchestrator_plan.json")
    for _ in range(99):
        write_artifact(ref, "coder", "note", "x")
    assert artifacts(run_dir)[-1].path.name == "100_coder_note.md"
    with pytest.raises(BadInput):
        write_artifact(ref, "Coder", "x", "")
    with pytest.raises(BadInput):
        write_artifact(ref, "coder", "../x", "")


def test_from_run_dir(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "state")
    run_id, run_dir = layout.create_run("T-1", NOON)
    _, empty = layout.create_run("T-1", NOON)
    journal.record(run_dir, "run_started", ticket="T-1", run=run_id)
    assert Layout.from_run_dir(run_dir) == (layout, "T-1", run_id)
    for bad in (tmp_path, tmp_path / "state" / "tickets" / "T-1", run_dir / "x", empty):
        with pytest.raises(BadInput):
            Layout.from_run_dir(bad)


def test_hostile_ticket_ids_never_become_paths(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "state")
    for ticket in ("../x", "..", "a/b", "", ".hidden", "x\x00y"):
        with pytest.raises(BadInput):
            layout.ticket_dir(ticket)
    assert not (tmp_path / "state").exists()
