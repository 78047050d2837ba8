"""How a segment starts from the run state it rebuilt from the shared remote:

- ``run``: no run of the ticket has its change summary yet. A machine that died while a run was
  being set up leaves a run directory with the plan and no summary, which ``cairn resume``
  refuses ("has no change summary"); no task can have been completed in it (a completion is
  pushed with its summary before ``cairn task done`` returns), so a new run starts.
- ``finished``: the ticket's last run finished — the worker died after its run ended, before
  Temporal heard of it — and the retry reports that run's outcome instead of resuming
  ("there is nothing to resume").
- ``resume``: anything else (``cairn resume --takeover``).

Plain files only (no temporalio): what ``cairn catchup`` would infer from the same state."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cairn.errors import ExitCode
from cairn.state.layout import (
    JOURNAL,
    SUMMARY_ARTIFACT,
    SUMMARY_ROLE,
    is_run_id,
    latest_artifact,
    run_sort_key,
)
from cairn.terms import run_status


@dataclass(frozen=True)
class Outset:
    command: Literal["run", "resume", "finished"]
    exit_code: int | None = None  # for ``finished``: the finished run's exit code


def outset(state_dir: Path) -> Outset:
    """How to start from the ticket's run state in ``state_dir``."""
    runs = _runs(state_dir)
    if not runs or latest_artifact(runs[-1], SUMMARY_ROLE, SUMMARY_ARTIFACT) is None:
        return Outset("run")
    status = _finished(runs[-1] / JOURNAL)
    if status is None:
        return Outset("resume")
    return Outset("finished", ExitCode.OK if status == "completed" else ExitCode.FAILURE)


def _runs(state_dir: Path) -> list[Path]:
    try:
        found = [p for p in state_dir.iterdir() if p.is_dir() and is_run_id(p.name)]
    except OSError:
        return []
    return sorted(found, key=lambda p: run_sort_key(p.name))


def _finished(journal: Path) -> str | None:
    """The status of the journal's last ``run_finished``, when no run (re)started after it."""
    status = None
    try:
        lines = journal.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if event.get("event") == "run_started":
            status = None
        elif event.get("event") == "run_finished":
            status = run_status(event.get("status"))
    return status
