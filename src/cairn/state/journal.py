"""The run journal ``run-log.jsonl``: one JSON object a line, appended and fsynced.

Every record is ``{"t": <ISO-8601 with offset>, "event": <name>, ...}``. The journal is the run's
write-ahead record: an operation appends its event first and then rewrites the summary and the
marker, so after a kill the journal is never behind them (``cairn.state.repair`` brings them up to
it). Appends hold the ticket's ``.lock``; a line torn by a kill is cut off by the next append, and
until then readers skip it with a warning.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from cairn.state.layout import JOURNAL, LOCK
from cairn.terms import JOURNAL_EVENTS, RUN_FORMAT, JournalEvent, run_status
from cairn.util import durable

WHAT = "journal"


def timestamp(when: datetime | None = None) -> str:
    return (when or datetime.now().astimezone()).isoformat(timespec="milliseconds")


def entry(event: JournalEvent, **fields: Any) -> dict[str, Any]:
    """The record of one event, stamped now; fields whose value is None are left out. A
    ``run_started`` says the format the run writes in (``cairn.terms.RUN_FORMAT``)."""
    if event not in JOURNAL_EVENTS:
        raise ValueError(f"unknown journal event {event!r}")
    if event == "run_started":
        fields = {"format": RUN_FORMAT, **fields}
    return {"t": timestamp(), "event": event, **{k: v for k, v in fields.items() if v is not None}}


def append(run_dir: Path, record: dict[str, Any]) -> None:
    """Append ``record`` to the run's journal, holding the ticket's lock."""
    line = json.dumps(record, ensure_ascii=False, default=str)
    with durable.locked(run_dir.parent / LOCK):
        durable.append_line(run_dir / JOURNAL, line, what=WHAT)


def record(run_dir: Path, event: JournalEvent, **fields: Any) -> dict[str, Any]:
    """Append one event to the run's journal and return it."""
    made = entry(event, **fields)
    append(run_dir, made)
    return made


def read(run_dir: Path, limit: int = 256 * 1024 * 1024) -> tuple[list[dict[str, Any]], list[str]]:
    """The journal's events and a warning for every line that had to be skipped."""
    path = run_dir / JOURNAL
    data = durable.read_state_file(path, WHAT, limit)
    if data is None:
        return [], []
    events: list[dict[str, Any]] = []
    warnings: list[str] = []
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        parsed = _event(raw)
        if parsed is None:
            torn = number == len(lines) or (number == len(lines) - 1 and not lines[-1])
            what = "torn (the writer was killed mid-line)" if torn else "not a JSON event"
            warnings.append(f"{path} line {number} is {what}; skipped")
            continue
        events.append(parsed)
    return events, warnings


def last(run_dir: Path) -> dict[str, Any] | None:
    """The journal's last complete event (a torn last line is not one), reading only its end."""
    data = durable.read_tail(run_dir / JOURNAL, WHAT)
    if data is None:
        return None
    complete = data[: data.rfind(b"\n") + 1]
    for raw in reversed(complete.split(b"\n")):
        if raw.strip():
            return _event(raw)
    return None


def last_event(run_dir: Path, *names: str) -> dict[str, Any] | None:
    events, _ = read(run_dir)
    for found in reversed(events):
        if not names or found.get("event") in names:
            return found  # type: ignore[no-any-return]
    return None


def _event(raw: bytes) -> dict[str, Any] | None:
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or "event" not in parsed:
        return None
    if parsed["event"] == "run_finished" and "status" in parsed:
        parsed["status"] = run_status(parsed["status"])  # the words of any format, today's
    return parsed
