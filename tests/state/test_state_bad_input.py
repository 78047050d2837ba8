"""Broken state files and hostile input: one-line error, exit 2, nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cairn.state.layout import MARKER
from cairn.terms import ENV_RUN_DIR
from helpers import (
    assert_error,
    assert_one_line_error,
    begin_run,
    cairn,
    state_files,
    state_root,
    summary_file,
)

GOOD = (
    "skill: impl\nphase: implement\nround: 1\n"
    "started_at: '2026-11-30T10:00:00+00:00'\nlast_updated: '2026-11-30T10:00:00+00:00'\n"
)


def _marker(repo: Path, ticket: str = "T-1") -> Path:
    path = state_root(repo) / "tickets" / ticket / MARKER
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _truncated(path: Path) -> None:
    path.write_text(GOOD[: GOOD.index("last_updated") + 20])


def _binary(path: Path) -> None:
    path.write_bytes(b"\x00\x01\x02\xff" * 64)


def _not_utf8(path: Path) -> None:
    path.write_bytes(GOOD.encode() + b"phase_note: \xff\xfe\n")


def _wrong_types(path: Path) -> None:
    path.write_text(GOOD.replace("round: 1", "round: two"))


def _list_not_mapping(path: Path) -> None:
    path.write_text("- a\n- b\n")


def _huge(path: Path) -> None:
    with path.open("wb") as handle:
        handle.truncate(100 * 1024 * 1024)


def _symlink_outside(path: Path) -> None:
    outside = path.parents[5] / "outside.yaml"
    outside.write_text(GOOD)
    path.symlink_to(outside)


def _newer_version(path: Path) -> None:
    path.write_text("version: 9\n" + GOOD)


CASES = {
    "truncated": (_truncated, "marker"),
    "binary": (_binary, "binary"),
    "not-utf8": (_not_utf8, "UTF-8"),
    "wrong-types": (_wrong_types, "round"),
    "not-a-mapping": (_list_not_mapping, "mapping"),
    "100MB": (_huge, "limit"),
    "symlink": (_symlink_outside, "symlink"),
    "newer-version": (_newer_version, "newer cairn"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize(
    "command",
    [
        ("catchup", "T-1"),
        ("catchup", "T-1", "--json"),
        ("catchup", "T-1", "--clear-stale"),
        ("status",),
        ("task", "start", "0", "--ticket", "T-1"),
    ],
)
def test_broken_marker(repo: Path, case: str, command: tuple[str, ...]) -> None:
    breaker, needle = CASES[case]
    path = _marker(repo)
    breaker(path)
    root = state_root(repo)
    before = state_files(root)
    outside = repo.parent / "outside.yaml"
    outside_before = outside.read_bytes() if outside.exists() else None
    result = cairn(*command, cwd=repo)
    error = assert_error(result)
    assert needle in error
    assert str(path) in error
    assert state_files(root) == before
    if outside_before is not None:
        assert outside.read_bytes() == outside_before


def test_summary_with_duplicated_task_heading(repo: Path) -> None:
    ref, lease = begin_run(repo, "T-2", ["One", "Two"])
    path = summary_file(ref)
    text = path.read_text()
    block = text[text.index("### Task 1:") : text.index("## Files changed")]
    path.write_text(text.replace(block, block + block))
    line = text[: text.index("### Task 1:")].count("\n") + 1 + block.count("\n")
    root = state_root(repo)
    before = state_files(root)
    for command in (
        ("task", "start", "0"),
        ("catchup", "T-2"),
        ("gate", "Tests", "--result", "pass"),
    ):
        result = cairn(*command, env={ENV_RUN_DIR: str(ref.run_dir)}, cwd=repo)
        assert_one_line_error(result)
        assert f"{path}:{line}" in result.stderr
        assert "Task 1" in result.stderr or "task 1" in result.stderr
    assert state_files(root) == before
    lease.release()


def test_summary_with_unknown_status(repo: Path) -> None:
    ref, lease = begin_run(repo, "T-3", ["One"])
    path = summary_file(ref)
    path.write_text(
        path.read_text().replace("### Task 0: One — pending", "### Task 0: One — halfway")
    )
    result = cairn("task", "done", "0", env={ENV_RUN_DIR: str(ref.run_dir)}, cwd=repo)
    assert_one_line_error(result)
    assert "halfway" in result.stderr
    lease.release()


def test_summary_symlink_is_refused(repo: Path, tmp_path: Path) -> None:
    ref, lease = begin_run(repo, "T-4", ["One"])
    path = summary_file(ref)
    target = tmp_path / "elsewhere.md"
    original = path.read_bytes()
    target.write_bytes(original)
    path.unlink()
    path.symlink_to(target)
    result = cairn("task", "done", "0", env={ENV_RUN_DIR: str(ref.run_dir)}, cwd=repo)
    assert_one_line_error(result)
    assert "symlink" in result.stderr
    assert target.read_bytes() == original
    lease.release()


def test_ticket_dir_symlink_is_not_listed(repo: Path, tmp_path: Path) -> None:
    tickets = state_root(repo) / "tickets"
    tickets.mkdir(parents=True)
    (tmp_path / "evil").mkdir()
    os.symlink(tmp_path / "evil", tickets / "EVIL-1")
    result = cairn("status", "--json", cwd=repo)
    assert result.returncode == 0
    assert result.stdout.strip() == "[]"
    refused = cairn("catchup", "EVIL-1", cwd=repo)
    assert_one_line_error(refused)
    assert "symlink" in refused.stderr
    assert list((tmp_path / "evil").iterdir()) == []


def test_bad_config_state_dir_value(repo: Path) -> None:
    (repo / "cairn.toml").write_text("state_dir = 5\n")
    result = cairn("config", "show", cwd=repo)  # status warns and goes on with the defaults
    assert_one_line_error(result)
    assert "state_dir" in result.stderr
