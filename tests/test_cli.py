"""The command itself: version, help, the demo, and errors that never show a traceback."""

from __future__ import annotations

from pathlib import Path

from cairn import __version__
from conftest import assert_one_line_error, cairn, git, write


def test_version_and_help() -> None:
    result = cairn("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"cairn {__version__}"
    helped = cairn("--help")
    assert helped.returncode == 0
    assert "wip" in helped.stdout and "demo" in helped.stdout
    for sub in ("save", "list", "show", "diff", "restore", "prune", "push"):
        assert sub in cairn("wip", "--help").stdout


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    result = cairn("demo", "--dir", str(tmp_path / "demo"))
    assert result.returncode == 0, result.stderr
    assert "untouched: yes" in result.stdout
    assert result.stdout.count("identical") == 3
    workspace = tmp_path / "demo" / "workspace"
    assert git(workspace, "rev-parse", "refs/cairn/wip/main").strip()


def test_demo_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    write(tmp_path / "busy", "file.txt", "mine")
    assert_one_line_error(cairn("demo", "--dir", str(tmp_path / "busy")))
    assert [p.name for p in (tmp_path / "busy").iterdir()] == ["file.txt"]


def test_unknown_option_is_exit_2(repo: Path) -> None:
    result = cairn("wip", "save", "--no-such-option", cwd=repo)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
