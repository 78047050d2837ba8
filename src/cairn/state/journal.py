"""The run journal ``run-log.jsonl``: one JSON object a line, appended and fsynced.

Every record is ``{"t": <ISO-8601 with offset>, "event": <name>, ...}``. A crash can tear the last
line; readers skip a line that is not a JSON object and report it as a warning.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from cairn.state.layout import JOURNAL
from cairn.terms import JOURNAL_EVENTS, JournalEvent
from cairn.util import durable


def timestamp(when: datetime | None = None) -> str:
    return (when or datetime.now().astimezone()).isoformat(timespec="milliseconds")


def record(run_dir: Path, event: JournalEvent, **fields: Any) -> dict[str, Any]:
    """Append one event to the run's journal and return it."""
    if event not in JOURNAL_EVENTS:
        raise ValueError(f"unknown journal event {event!r}")
    entry = {"t": timestamp(), "event": event, **{k: v for k, v in fields.items() if v is not None}}
    durable.append_line(run_dir / JOURNAL, json.dumps(entry, ensure_ascii=False, default=str))
    return entry


def read(run_dir: Path, limit: int = 256 * 1024 * 1024) -> tuple[list[dict[str, Any]], list[str]]:
    """The journal's events and a warning for every line that had to be skipped."""
    path = run_dir / JOURNAL
    data = durable.read_state_file(path, "journal", limit)
    if data is None:
        return [], []
    events: list[dict[str, Any]] = []
    warnings: list[str] = []
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            entry = None
        if not isinstance(entry, dict) or "event" not in entry:
            torn = number == len(lines) or (number == len(lines) - 1 and not lines[-1])
            what = "torn (the writer was killed mid-line)" if torn else "not a JSON event"
            warnings.append(f"{path} line {number} is {what}; skipped")
            continue
        events.append(entry)
    return events, warnings


def last_event(run_dir: Path, *names: str) -> dict[str, Any] | None:
    events, _ = read(run_dir)
    for entry in reversed(events):
        if not names or entry.get("event") in names:
            return entry  # type: ignore[no-any-return]
    return None
