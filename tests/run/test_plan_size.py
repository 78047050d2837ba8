"""Plans are sized against the change summary's limit before anything is written (issue 12,
defect 5): a 10,000-task plan used to start a run, write its directory and marker, and then fail,
locking catch-up, resume and every report of the ticket out (exit 2) from then on."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from cairn import summary
from cairn.errors import BadInput
from cairn.run import launch, progress
from cairn.summary.store import READ_LIMIT
from cairn.terms import ENV_RUN_DIR
from helpers import assert_one_line_error, begin_run, cairn, state_root, untouched_state, write

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CONFIG = '[agent]\nkind = "command"\ncommand = ["true", "{prompt}"]\n'


def plan_of(tmp_path: Path, tasks: int, words: int = 6) -> Path:
    title = " ".join(["implement the frobnicator part carefully"] * words)
    sections = [f"### Task {n}: {title} {n}\n" for n in range(tasks)]
    return write(tmp_path, "plan.md", "\n".join(sections))


def test_a_plan_too_large_for_its_summary_is_refused_before_anything_is_written(
    repo: Path, tmp_path: Path
) -> None:
    write(repo, "cairn.toml", CONFIG)
    plan = plan_of(tmp_path, 10_000)
    assert plan.stat().st_size < 4 * 1024 * 1024  # under the plan limit itself
    before = untouched_state(repo)
    result = cairn("run", str(plan), "--ticket", "T-1", cwd=repo)
    assert_one_line_error(result)
    assert "10000 tasks" in result.stderr and "split the plan" in result.stderr
    assert untouched_state(repo) == before
    assert not (state_root(repo) / "tickets").exists()
    # the ticket is as it was before: unknown here (catch-up names it so, exit 2)
    left = cairn("catchup", "T-1", cwd=repo)
    assert left.returncode == 2 and "no ticket T-1 here" in left.stderr


def test_the_share_a_plan_may_use_is_a_quarter_of_the_summary_limit() -> None:
    allowed = READ_LIMIT // launch.PLAN_SHARE
    launch.check_plan_size(Path("p.md"), 1, summary.scaffold_tasks("T-1", None, [(0, "One")], NOW))
    fits = [(n, "x" * 200) for n in range(allowed // 400)]
    launch.check_plan_size(Path("p.md"), len(fits), summary.scaffold_tasks("T-1", None, fits, NOW))
    many = [(n, "x" * 200) for n in range(allowed // 200)]
    with pytest.raises(BadInput, match="a plan may use"):
        launch.check_plan_size(
            Path("p.md"), len(many), summary.scaffold_tasks("T-1", None, many, NOW)
        )


def test_a_report_that_would_outgrow_the_summary_is_refused_and_the_run_goes_on(
    repo: Path,
) -> None:
    ref, lease = begin_run(repo, "T-1", [f"Task {n}" for n in range(60)])
    try:
        notes = "n" * 100_000
        for n in range(41):
            progress.task_set_aside(ref, n, "deferred", notes)
        env = {ENV_RUN_DIR: str(ref.run_dir)}
        before = untouched_state(repo)
        result = cairn("task", "skip", "42", "--notes", "n" * 120_000, env=env, cwd=repo)
        assert_one_line_error(result)
        assert "limit" in result.stderr and "nothing was written" in result.stderr
        assert untouched_state(repo) == before
        assert cairn("catchup", "T-1", cwd=repo).returncode == 0
        assert cairn("task", "start", "42", env=env, cwd=repo).returncode == 0
    finally:
        lease.release()
