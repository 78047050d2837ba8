"""Bringing a run's change summary and marker up to its journal, the write-ahead record.

Every operation on a run appends its journal event first, then rewrites the summary, then the
marker, all under the ticket's ``.lock``. A writer killed in between leaves files that lag
behind the journal's last event, and only that event: the next writer (or ``cairn catchup``)
repairs them before it writes anything of its own. Each event says what it changed, so its
change can be applied again; a change already applied is recognised and left alone, so
repairing twice changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from cairn import summary
from cairn.errors import BadInput
from cairn.state import journal, marker
from cairn.state.layout import SUMMARY_ARTIFACT, SUMMARY_ROLE, latest_artifact
from cairn.summary import Summary
from cairn.terms import FINDING_RESOLUTIONS
from cairn.util import clock, durable

SummaryChange = Callable[[Summary], Summary]
_CRITERION = re.compile(r"AC-\d+")  # an evaluator's verdict: it goes to the evaluation file
# The events that change the summary (a dispatch's start: an interrupted run goes on).
SUMMARY_EVENTS = frozenset(
    {
        "task",
        "finding",
        "gate",
        "deferred",
        "cutoff",
        "run_interrupted",
        "run_finished",
        "dispatch_started",
    }
)
_ENDS = frozenset({"run_finished", "marker_cleared"})


class RunState:
    """A run's files as read under the lock, and what they need to catch up with the journal.

    ``summary`` and ``marker`` are as they should be (repaired in memory when they lag);
    ``marker`` is None when the ticket's marker is not this run's."""

    # a plain class, not a dataclass: importing dataclasses costs every hook call ~10 ms
    def __init__(
        self,
        run_dir: Path,
        marker_path: Path,
        last: dict[str, Any] | None,
        summary_path: Path | None,
        summary: Summary | None,
        marker: marker.Marker | None,
    ) -> None:
        self.run_dir = run_dir
        self.marker_path = marker_path
        self.last = last
        self.summary_path = summary_path
        self.summary = summary
        self.marker = marker
        self.summary_lags = False
        self.marker_lags = False
        self.remove_marker = False

    @property
    def lagging(self) -> bool:
        return self.summary_lags or self.marker_lags or self.remove_marker


def read(run_dir: Path, run_id: str, marker_path: Path, with_summary: bool = True) -> RunState:
    """The run's files and, in memory, their repair. ``with_summary`` False skips reading the
    summary unless the journal's last event changes it (a marker-only transition)."""
    last = journal.last(run_dir)
    name = last.get("event") if last else None
    found = latest_artifact(run_dir, SUMMARY_ROLE, SUMMARY_ARTIFACT)
    path = found.path if found else None
    current_summary = None
    if path is not None and (with_summary or name in SUMMARY_EVENTS):
        current_summary = summary.load(path)
    current_marker = marker.read(marker_path)
    if current_marker is not None and current_marker.run != run_id:
        current_marker = None
    state = RunState(run_dir, marker_path, last, path, current_summary, current_marker)
    if last is not None:
        _catch_up_summary(state, last)
        _catch_up_marker(state, last)
    return state


def write(state: RunState) -> None:
    """Write what ``read`` repaired, and sweep the temp files of killed writers. The caller
    holds the ticket's lock."""
    if state.summary_lags and state.summary_path is not None and state.summary is not None:
        summary.save(state.summary_path, state.summary)
        state.summary_lags = False
    if state.remove_marker:
        marker.remove(state.marker_path)
        state.remove_marker = False
    elif state.marker_lags and state.marker is not None:
        marker.write(state.marker_path, state.marker)
        state.marker_lags = False
    durable.remove_stale_temps(state.run_dir)
    durable.remove_stale_temps(state.marker_path.parent)


def summary_change(event: dict[str, Any]) -> SummaryChange | None:
    """The change to the summary that ``event`` records; None for events that change none."""
    name, now = event.get("event"), _time(event)
    status = event.get("status")
    if name == "task" and _is_int(event.get("task")):
        return _task_change(event["task"], status, now, event)
    ident = event.get("finding")
    if name == "finding" and status in FINDING_RESOLUTIONS and isinstance(ident, str):
        action = event.get("action")
        return lambda s: summary.address_finding(s, ident, status, now, action=action)
    if name == "gate" and isinstance(event.get("gate"), str) and not event.get("criterion"):
        gate, result = event["gate"], event.get("result")
        if _CRITERION.fullmatch(gate) or not isinstance(result, str):
            return None  # an evaluator's verdict (older journals have no "criterion")
        command = event.get("command")
        return lambda s: summary.set_gate(s, gate, result, now, command=command)
    if name == "deferred" and isinstance(event.get("item"), str):
        item = event["item"]
        return lambda s: summary.add_deferred(s, item, now)
    if name in ("cutoff", "run_interrupted") and isinstance(event.get("reason"), str):
        reason, commit, ref = event["reason"], event.get("snapshot"), event.get("ref")
        short = commit[:12] if isinstance(commit, str) and ref else None
        saved = ref if short else None
        detail = event.get("detail") if isinstance(event.get("detail"), str) else None
        return lambda s: summary.mark_interrupted(
            s, reason, now, ref=saved, commit=short, detail=detail
        )
    if name == "dispatch_started":
        return lambda s: summary.resume_status(s, now)
    if name == "run_finished" and status == "completed":
        return lambda s: s if s.status.state == "completed" else summary.finalise(s, now)
    return None


def marker_change(event: dict[str, Any], current: Summary | None) -> dict[str, Any]:
    """The marker fields ``event`` sets (after ``current``, the summary it left)."""
    name = event.get("event")
    if name in ("task", "finding", "gate", "deferred") and current is not None:
        item = current.status.item
        return {"task": item if _is_int(item) else None}
    if name == "phase" and isinstance(event.get("phase"), str):
        return {"phase": event["phase"], "round": event.get("round")}
    if name == "dispatch_finished":
        return {"dispatch": None}
    if name in ("snapshot", "cutoff", "run_interrupted"):
        changes: dict[str, Any] = {} if name == "snapshot" else {"dispatch": None}
        if name == "run_interrupted":
            changes["owner"] = None
        snap = _snapshot(event)
        if snap is not None:
            changes["snapshot"] = snap
        return changes
    return {}


def _catch_up_summary(state: RunState, last: dict[str, Any]) -> None:
    change = summary_change(last)
    if change is None or state.summary is None:
        return
    try:
        after = change(state.summary)
    except BadInput:
        return  # the event does not apply to this summary: nothing to repair from it
    if not _applied(last, state.summary, after):
        state.summary, state.summary_lags = after, True


def _catch_up_marker(state: RunState, last: dict[str, Any]) -> None:
    current = state.marker
    if current is None:
        return
    name = last.get("event")
    if name in _ENDS:
        state.marker, state.remove_marker = None, True
        return
    changes = marker_change(last, state.summary)
    if name == "dispatch_started" and current.dispatch is None:
        changes = {"dispatch": _record(last.get("dispatch"))}
    turn = last.get("turn")
    running = current.dispatch
    if name == "turn" and running is not None and isinstance(turn, int) and running.turn < turn:
        changes = {"dispatch": msgspec.structs.replace(running, turn=turn)}
    changes = {k: v for k, v in changes.items() if not _same(k, getattr(current, k), v)}
    if changes:
        try:
            state.marker = msgspec.structs.replace(
                current, **{**changes, "last_updated": clock.now()}
            )
        except ValueError:  # msgspec's ValidationError
            return
        state.marker_lags = True


def _same(key: str, have: Any, want: Any) -> bool:
    if key == "snapshot" and have is not None and want is not None:
        return bool(have.commit == want.commit)  # when it was taken is not in every event
    return bool(have == want)


def _applied(event: dict[str, Any], before: Summary, after: Summary) -> bool:
    """Whether ``before`` already holds what ``event`` records (``after`` is it applied)."""
    name = event.get("event")
    if name == "task":
        return before.task(event["task"]) == after.task(event["task"])
    if name == "finding":
        return before.finding(event["finding"]) == after.finding(event["finding"])
    if name == "gate":
        return before.gates == after.gates
    if name == "deferred":
        return bool(before.deferred) and before.deferred[-1] == after.deferred[-1]  # type: ignore[index]
    if name in ("cutoff", "run_interrupted"):
        return before.status == after.status
    return before.status.state == after.status.state


def _task_change(n: int, status: Any, now: datetime, event: dict[str, Any]) -> SummaryChange | None:
    notes = event.get("notes")
    if status == "in progress":
        return lambda s: summary.start_task(s, n, now)
    if status == "completed":
        files, outcome, agent = event.get("files"), event.get("outcome"), event.get("agent")
        return lambda s: summary.complete_task(
            s, n, now, files=files, outcome=outcome, notes=notes, agent=agent
        )
    if status == "skipped":
        return lambda s: summary.skip_task(s, n, now, notes)
    if status == "deferred":
        return lambda s: summary.defer_task(s, n, now, notes)
    return None


def _snapshot(event: dict[str, Any]) -> marker.SnapshotRef | None:
    data = event.get("snapshot")
    try:
        if isinstance(data, dict):
            return msgspec.convert(data, marker.SnapshotRef, strict=False)
        if isinstance(data, str) and isinstance(event.get("ref"), str):
            return marker.SnapshotRef(ref=event["ref"], commit=data, at=_time(event))
    except ValueError:  # msgspec's ValidationError
        return None
    return None


def _record(data: Any) -> marker.DispatchRecord | None:
    try:
        return msgspec.convert(data, marker.DispatchRecord, strict=False)
    except ValueError:  # msgspec's ValidationError
        return None


def _time(event: dict[str, Any]) -> datetime:
    try:
        return datetime.fromisoformat(str(event.get("t"))).replace(microsecond=0)
    except ValueError:
        return clock.now()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
