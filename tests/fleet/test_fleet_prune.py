"""``cairn fleet prune``: a worktree goes only when nothing in it exists nowhere else."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from cairn import config as config_module
from cairn.cli.handlers.fleet_prune import prune as prune_command
from cairn.config.records import Config
from cairn.errors import BadInput
from cairn.fleet import fleetstate, prune, workspaces
from cairn.git import Repo
from cairn.state.layout import Layout
from helpers import assert_one_line_error, cairn, fingerprint, git, rev, snapshot_files, write


def setup(repo: Path, toml: str | None = None) -> tuple[Repo, Config, Layout]:
    if toml is not None:
        write(repo, "cairn.toml", toml)
    found = Repo.discover(repo)
    cfg = config_module.load(found.toplevel)
    return found, cfg, Layout.for_repo(found, cfg)


def finished(layout: Layout, ticket: str, worktree: Path, state: str = "completed") -> None:
    fleetstate.write(
        layout,
        msgspec.convert(
            {
                "ticket": ticket,
                "plan": f"cairn-queue/{ticket}.md",
                "state": state,
                "attempt": 1,
                "worktree": str(worktree),
                "branch": f"cairn/{ticket}",
                "updated": datetime.now(UTC),
            },
            fleetstate.FleetTicket,
        ),
    )


def objects_of(repo: Path) -> set[str]:
    """Every file in the object store (prune may add, never remove)."""
    store = repo / ".git" / "objects"
    return {str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()}


def test_prune_keeps_the_uncommitted_file_and_the_unmerged_commit(repo: Path) -> None:
    found, cfg, layout = setup(repo)
    ws = workspaces.ensure(found, cfg, "T-1")
    write(ws.path, "feature.py", "ready = True\n")
    git(ws.path, "add", "feature.py")
    git(ws.path, "commit", "-qm", "feature on no other branch")
    commit = rev(ws.path, "HEAD")
    write(ws.path, "notes.txt", "left uncommitted\n")
    finished(layout, "T-1", ws.path)
    main_before, objects_before = fingerprint(repo), objects_of(repo)

    report = prune.prune(found, cfg, "T-1", dry_run=False, layout=layout)

    assert report.action == "removed", report
    assert report.freed_bytes > 0 and report.snapshot
    assert not ws.path.exists()
    assert "T-1" not in git(repo, "worktree", "list")
    # nothing lost: read both back
    assert rev(repo, "cairn/T-1") == commit
    assert git(repo, "show", f"{commit}:feature.py") == "ready = True\n"
    assert rev(repo, "refs/cairn/wip/T-1") == report.snapshot
    files = snapshot_files(repo, report.snapshot)
    assert files["notes.txt"] == b"left uncommitted\n" and files["feature.py"] == b"ready = True\n"
    assert git(repo, "merge-base", "--is-ancestor", commit, report.snapshot) == ""
    # the main work tree and the object store untouched (objects only added)
    assert fingerprint(repo) == main_before
    assert objects_before <= objects_of(repo)
    record = fleetstate.read(layout, "T-1")
    assert record is not None and record.worktree is None
    # the worktree comes back with the work on the next ensure
    back = workspaces.ensure(found, cfg, "T-1")
    assert (back.path / "notes.txt").read_text() == "left uncommitted\n"


def test_a_file_no_snapshot_can_hold_is_refused_and_listed(repo: Path) -> None:
    found, cfg, layout = setup(repo, "[snapshot]\nmax_new_file_bytes = 100\n")
    ws = workspaces.ensure(found, cfg, "T-1")
    write(ws.path, "big.bin", b"x" * 1000)
    write(ws.path, "small.txt", "fits\n")
    report = prune.prune(found, cfg, "T-1", dry_run=False, layout=layout)
    assert report.action == "refused"
    assert report.reason == (
        "1 uncommitted file in no snapshot (big.bin is over the size cap of 100 B set by "
        "snapshot.max_new_file_bytes); commit the files or move them out of the worktree (or "
        "raise snapshot.max_new_file_bytes), then prune again"
    )
    assert report.uncommitted == ["big.bin"]
    assert (ws.path / "big.bin").stat().st_size == 1000 and (ws.path / "small.txt").exists()
    assert report.snapshot and snapshot_files(repo, report.snapshot)["small.txt"] == b"fits\n"


def test_commits_reachable_only_from_the_branch_are_refused(repo: Path) -> None:
    found, cfg, layout = setup(repo)
    ws = workspaces.ensure(found, cfg, "T-1")
    write(ws.path, "a.txt", "a\n")
    git(ws.path, "add", "a.txt")
    git(ws.path, "commit", "-qm", "only on cairn/T-1")
    only = rev(ws.path, "HEAD")
    git(ws.path, "checkout", "-q", "--detach", "main")  # HEAD no longer holds that commit
    report = prune.prune(found, cfg, "T-1", dry_run=False, layout=layout)
    assert report.action == "refused"
    assert report.unsaved_commits == [only]
    assert report.reason == (
        "1 commit on no other branch or remote; push the commits or put a branch on them, "
        "then prune again"
    )
    assert ws.path.is_dir()
    # once the commit is on another branch, prune proceeds
    git(repo, "branch", "keep", only)
    assert prune.prune(found, cfg, "T-1", dry_run=False, layout=layout).action == "removed"


def test_dry_run_changes_nothing(repo: Path) -> None:
    found, cfg, layout = setup(repo)
    ws = workspaces.ensure(found, cfg, "T-1")
    write(ws.path, "notes.txt", "x\n")
    refs = git(repo, "for-each-ref")
    report = prune.prune(found, cfg, "T-1", dry_run=True, layout=layout)
    assert report.action == "would_remove" and report.snapshot is None
    assert ws.path.is_dir() and git(repo, "for-each-ref") == refs


def test_a_failing_before_remove_hook_keeps_the_worktree(repo: Path) -> None:
    found, cfg, layout = setup(repo, '[fleet.hooks]\nbefore_remove = "echo busy; exit 1"\n')
    ws = workspaces.ensure(found, cfg, "T-1")
    report = prune.prune(found, cfg, "T-1", dry_run=False, layout=layout)
    assert report.action == "kept"
    assert report.reason == "hook before_remove exited 1: busy; kept"
    assert ws.path.is_dir()


def test_a_file_the_before_remove_hook_writes_is_snapshotted_too(repo: Path) -> None:
    found, cfg, layout = setup(repo, '[fleet.hooks]\nbefore_remove = "echo log > hook.log"\n')
    workspaces.ensure(found, cfg, "T-1")
    report = prune.prune(found, cfg, "T-1", dry_run=False, layout=layout)
    assert report.action == "removed" and report.snapshot
    assert snapshot_files(repo, report.snapshot)["hook.log"] == b"log\n"


def test_a_running_ticket_is_refused(repo: Path) -> None:
    found, cfg, layout = setup(repo)
    ws = workspaces.ensure(found, cfg, "T-1")
    finished(layout, "T-1", ws.path, state="running")
    record = fleetstate.read(layout, "T-1")
    assert record is not None
    fleetstate.write(layout, msgspec.structs.replace(record, pid=os.getpid()))
    report = prune.prune(found, cfg, "T-1", dry_run=False, layout=layout)
    assert report.action == "refused" and "is running" in (report.reason or "")
    assert ws.path.is_dir()


def test_the_command_prunes_all_finished_and_reports_json(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found, cfg, layout = setup(repo)
    done = workspaces.ensure(found, cfg, "T-1")
    busy = workspaces.ensure(found, cfg, "T-2")
    finished(layout, "T-1", done.path)
    finished(layout, "T-2", busy.path, state="retrying")
    prune_command(all_finished=True, json=True, workspace=repo)
    payload = json.loads(capsys.readouterr().out)
    assert [t["ticket"] for t in payload["tickets"]] == ["T-1"]
    assert payload["tickets"][0]["action"] == "removed" and payload["freed_bytes"] > 0
    assert not done.path.exists() and busy.path.is_dir()
    prune_command(ticket="T-2", dry_run=True, workspace=repo)
    assert ", then remove " in capsys.readouterr().out
    finished(layout, "T-9", repo.parent / "gone")  # a record whose worktree is gone
    prune_command(ticket="T-9", workspace=repo)
    assert capsys.readouterr().out == "T-9: no worktree\n"


def test_the_command_lists_what_it_refuses(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found, cfg, _layout = setup(repo, "[snapshot]\nmax_new_file_bytes = 10\n")
    workspaces.ensure(found, cfg, "T-1")
    write(repo.parent / "repo.cairn" / "T-1", "big.bin", b"y" * 100)
    code = prune_command(ticket="T-1", workspace=repo)
    out = capsys.readouterr().out
    assert code == 1
    assert "1 uncommitted file in no snapshot (big.bin is over the size cap of 10 B" in out
    assert "or raise snapshot.max_new_file_bytes), then prune again" in out
    assert "uncommitted, in no snapshot: big.bin" in out


@pytest.mark.parametrize(
    "kwargs", [{}, {"ticket": "T-1", "all_finished": True}, {"ticket": "../x"}]
)
def test_the_command_refuses_bad_input(repo: Path, kwargs: dict[str, object]) -> None:
    with pytest.raises(BadInput):
        prune_command(workspace=repo, **kwargs)  # type: ignore[arg-type]


def test_prune_never_removes_the_main_work_tree(repo: Path) -> None:
    found, cfg, layout = setup(repo)
    git(repo, "checkout", "-q", "-b", "cairn/T-1")  # the ticket's branch in the main tree
    before = fingerprint(repo)
    report = prune.prune(found, cfg, "T-1", dry_run=False, layout=layout)
    assert report.action == "absent"
    assert fingerprint(repo) == before and (repo / ".git").is_dir()


def test_cairn_fleet_prune_through_the_cli(repo: Path) -> None:
    """The issue's case through the real command line: a finished ticket whose worktree holds
    an uncommitted file and a commit on no other branch; then a refusal, exit 1, nothing gone."""
    found, cfg, layout = setup(repo)
    ws = workspaces.ensure(found, cfg, "T-1")
    write(ws.path, "feature.py", "ready = True\n")
    git(ws.path, "add", "feature.py")
    git(ws.path, "commit", "-qm", "feature on no other branch")
    commit = rev(ws.path, "HEAD")
    write(ws.path, "notes.txt", "left uncommitted\n")
    finished(layout, "T-1", ws.path)

    done = cairn("fleet", "prune", "T-1", "--json", cwd=repo)
    assert done.returncode == 0, (done.stdout, done.stderr)
    (ticket,) = json.loads(done.stdout)["tickets"]
    assert ticket["action"] == "removed" and not ws.path.exists()
    assert rev(repo, "cairn/T-1") == commit
    assert snapshot_files(repo, "refs/cairn/wip/T-1")["notes.txt"] == b"left uncommitted\n"

    cfg_big = "[snapshot]\nmax_new_file_bytes = 10\n"
    write(repo, "cairn.toml", cfg_big)
    found, cfg, layout = setup(repo)
    ws2 = workspaces.ensure(found, cfg, "T-2")
    write(ws2.path, "big.bin", b"y" * 100)
    finished(layout, "T-2", ws2.path)
    refused = cairn("fleet", "prune", "T-2", cwd=repo)
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert "1 uncommitted file in no snapshot (big.bin is over the size cap" in refused.stdout
    assert (ws2.path / "big.bin").read_bytes() == b"y" * 100


def test_the_command_says_what_it_snapshots_before_it_removes(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """(issue 22) The report said only ``removed …, freed …``: what the snapshot taken first
    holds (the uncommitted files and HEAD) comes before it, and in a dry run too."""
    found, cfg, layout = setup(repo)
    ws = workspaces.ensure(found, cfg, "T-1")
    write(ws.path, "notes.txt", "one\n")
    write(ws.path, "more.txt", "two\n")
    head = rev(ws.path, "HEAD")
    finished(layout, "T-1", ws.path)
    prune_command(ticket="T-1", dry_run=True, workspace=repo)
    planned = capsys.readouterr().out.splitlines()
    assert planned[0] == (
        f"T-1: would snapshot its 2 uncommitted files and HEAD {head[:12]}, then remove {ws.path}"
    )
    prune_command(ticket="T-1", workspace=repo)
    said = capsys.readouterr().out.splitlines()
    snapshot = rev(repo, "refs/cairn/wip/T-1")
    assert (
        said[0]
        == f"T-1: snapshot {snapshot[:12]} holds its 2 uncommitted files and HEAD {head[:12]}"
    )
    assert said[1].startswith(f"T-1: removed {ws.path}, freed ")
    assert not ws.path.exists()
    done = cairn("fleet", "prune", "T-1", "--json", cwd=repo)
    (again,) = json.loads(done.stdout)["tickets"]
    assert again["action"] == "absent"


def test_an_unknown_ticket_is_bad_input_naming_the_fleets(repo: Path) -> None:
    """(issue 22) ``fleet prune T-9`` of a ticket the fleet never had said ``no worktree``,
    exit 0: a typo passed for done. It is exit 2 naming the fleet's tickets."""
    found, cfg, layout = setup(repo)
    empty = cairn("fleet", "prune", "T-9", cwd=repo)
    assert_one_line_error(empty)
    assert "no fleet ticket T-9 here, nor any other yet; cairn fleet start" in empty.stderr
    for ticket in ("T-2", "T-1"):
        finished(layout, ticket, workspaces.ensure(found, cfg, ticket).path)
    before = fingerprint(repo)
    typo = cairn("fleet", "prune", "T-9", cwd=repo)
    assert_one_line_error(typo)
    assert "no fleet ticket T-9 here; pass one of: T-1, T-2" in typo.stderr
    assert fingerprint(repo) == before


def test_a_prune_killed_after_removing_the_worktree_is_finished_by_the_next(repo: Path) -> None:
    """Killed at ``fleet.worktree_removed`` (the worktree gone, the record still naming it):
    nothing is lost, and the next prune finishes the job."""
    from cairn.terms import ENV_CRASH_AT, ENV_FAULT_INJECTION

    found, cfg, layout = setup(repo)
    ws = workspaces.ensure(found, cfg, "T-1")
    write(ws.path, "notes.txt", "left uncommitted\n")
    finished(layout, "T-1", ws.path)
    crash = {ENV_FAULT_INJECTION: "1", ENV_CRASH_AT: "fleet.worktree_removed"}
    killed = cairn("fleet", "prune", "T-1", cwd=repo, env=crash)
    assert killed.returncode == -9, (killed.stdout, killed.stderr)
    assert not ws.path.exists()
    assert snapshot_files(repo, "refs/cairn/wip/T-1")["notes.txt"] == b"left uncommitted\n"
    record = fleetstate.read(layout, "T-1")
    assert record is not None and record.worktree == str(ws.path)  # not updated: killed first
    shown = cairn("fleet", "status", "--json", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    again = cairn("fleet", "prune", "T-1", "--json", cwd=repo)
    assert again.returncode == 0, (again.stdout, again.stderr)
    record = fleetstate.read(layout, "T-1")
    assert record is not None and record.worktree is None
    assert "notes.txt" not in git(repo, "status", "--porcelain")
