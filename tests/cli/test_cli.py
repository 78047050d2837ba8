"""The command itself: version, help, the demo, and errors that never show a traceback."""

from __future__ import annotations

from pathlib import Path

from cairn import __version__
from helpers import assert_one_line_error, cairn, git, write


def test_version_and_help() -> None:
    result = cairn("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"cairn {__version__}"
    helped = cairn("--help")
    assert helped.returncode == 0
    assert "wip" in helped.stdout and "demo" in helped.stdout
    for sub in ("save", "list", "show", "diff", "restore", "prune", "push"):
        assert sub in cairn("wip", "--help").stdout
    for command in ("run", "resume", "catchup", "status", "task", "finding", "gate", "config"):
        assert command in helped.stdout


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    from cairn import summary
    from cairn.state import journal
    from cairn.state.layout import artifacts

    # --dir relative to where it is typed (the agent's script was once looked for under the
    # project a second time: d/project/d/agent-script.yaml)
    result = cairn("demo", "--dir", "demo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"cairn status -C {tmp_path / 'demo' / 'project'}" in out
    assert "→ interrupted (max_turns), exit code 3" in out
    assert "src/divide.py" in out.split("2. Nothing is lost")[1].split("\n")[1]
    flat = " ".join(out.split())
    assert (
        "catchup" in flat and "You were in the middle of implementing the plan, task 2 of 4" in flat
    )
    assert "→ completed, exit code 0" in out
    assert flat.index("interrupted") < flat.index("You were in the middle of")
    assert flat.rindex("completed") > flat.index("cairn resume")
    project = tmp_path / "demo" / "project"
    runs = list((project / ".git" / "cairn" / "tickets" / "DEMO-1").glob("2*"))
    assert len(runs) == 1
    names = [a.path.name for a in artifacts(runs[0])]
    assert set(names[:2]) == {"01_orchestrator_plan.md", "01_orchestrator_plan.json"}
    assert names[2] == "02_coder_change-summary.md"
    first = summary.load(runs[0] / "02_coder_change-summary.md")
    assert first is not None and first.status.state == "completed"
    assert [t.status for t in first.tasks] == ["completed"] * 4
    events = [e["event"] for e in journal.read(runs[0])[0]]
    assert events.count("cutoff") == 1 and events[-1] == "run_finished"
    assert not (project / ".git" / "cairn" / "tickets" / "DEMO-1" / ".in-progress.yaml").exists()
    assert git(project, "status", "--porcelain").strip() == ""


def test_demo_removes_its_temporary_directory_unless_kept(tmp_path: Path) -> None:
    """The README's quick start: a bare ``cairn demo`` leaves nothing behind."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    result = cairn("demo", env={"TMPDIR": str(scratch)})
    assert result.returncode == 0, result.stderr
    assert "→ completed, exit code 0" in result.stdout
    assert "is removed now; `cairn demo --keep` keeps it" in result.stdout
    assert list(scratch.iterdir()) == []

    kept = cairn("demo", "--keep", env={"TMPDIR": str(scratch)})
    assert kept.returncode == 0, kept.stderr
    (made,) = scratch.iterdir()
    assert made.name.startswith("cairn-demo-") and (made / "project" / ".git").is_dir()
    assert f"cairn status -C {made / 'project'}" in kept.stdout


def test_demo_json_and_a_given_directory_is_never_removed(tmp_path: Path) -> None:
    import json

    result = cairn("demo", "--dir", "mine", "--json", cwd=tmp_path)  # relative, too
    assert result.returncode == 0 and result.stderr == ""
    facts = json.loads(result.stdout)
    assert facts["directory"] == str(tmp_path / "mine") and facts["kept"] is True
    assert facts["interrupted"]["status"] == "interrupted"
    assert facts["interrupted"]["reason"] == "max_turns"
    assert facts["resumed"]["status"] == "completed" and facts["exit_code"] == 0
    assert (tmp_path / "mine" / "project" / ".git").is_dir()


def test_demo_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    write(tmp_path / "busy", "file.txt", "mine")
    assert_one_line_error(cairn("demo", "--dir", str(tmp_path / "busy")))
    assert [p.name for p in (tmp_path / "busy").iterdir()] == ["file.txt"]


def test_unknown_option_is_exit_2(repo: Path) -> None:
    result = cairn("wip", "save", "--no-such-option", cwd=repo)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
