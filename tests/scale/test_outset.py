"""How a segment starts from the run state it rebuilt (the scale bench found both refusals: a
machine killed while its run was being set up, and one killed after its run had finished)."""

from __future__ import annotations

import json
from pathlib import Path

from cairn.scale.outset import Outset, outset

RUN = "20261201-083106Z"


def state(tmp_path: Path, *, summary: bool, events: list[dict[str, str]]) -> Path:
    ticket = tmp_path / "tickets" / "T-1"
    run = ticket / RUN
    run.mkdir(parents=True)
    (ticket / "lease").write_text("{}\n")
    (run / "01_orchestrator_plan.md").write_text("# Plan\n")
    if summary:
        (run / "02_coder_change-summary.md").write_text("# Change summary\n")
    lines = [json.dumps({"t": "2026-12-01T08:31:06Z", **e}) for e in events]
    (run / "run-log.jsonl").write_text("".join(f"{line}\n" for line in lines))
    return ticket


def test_no_run_yet_starts_one(tmp_path: Path) -> None:
    assert outset(tmp_path / "absent") == Outset("run")
    (tmp_path / "empty").mkdir()
    assert outset(tmp_path / "empty") == Outset("run")


def test_a_run_without_its_summary_is_started_again(tmp_path: Path) -> None:
    ticket = state(tmp_path, summary=False, events=[{"event": "run_started"}])
    assert outset(ticket) == Outset("run")


def test_an_unfinished_run_is_resumed(tmp_path: Path) -> None:
    started = [{"event": "run_started"}, {"event": "task", "task": "1"}]
    assert outset(state(tmp_path / "a", summary=True, events=started)) == Outset("resume")
    again = [*started, {"event": "run_finished", "status": "completed"}, {"event": "run_started"}]
    assert outset(state(tmp_path / "b", summary=True, events=again)) == Outset("resume")


def test_a_finished_run_reports_its_outcome(tmp_path: Path) -> None:
    done = [{"event": "run_started"}, {"event": "run_finished", "status": "completed"}]
    assert outset(state(tmp_path / "a", summary=True, events=done)) == Outset("finished", 0)
    review = [{"event": "run_started"}, {"event": "run_finished", "status": "needs_review"}]
    assert outset(state(tmp_path / "b", summary=True, events=review)) == Outset("finished", 1)
