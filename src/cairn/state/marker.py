"""The progress marker ``tickets/<ticket>/.in-progress.yaml``: where a run is right now.

Rewritten atomically at every transition and removed when the run ends. A hand-written marker
with only the five original fields (``skill``, ``phase``, ``round``, ``started_at``,
``last_updated``) is accepted; times without an offset are taken as UTC.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from cairn.errors import CorruptState
from cairn.state import owner
from cairn.state.names import MARKER_READ_LIMIT
from cairn.state.owner import Liveness, Owner, with_offsets
from cairn.terms import TicketState
from cairn.util import clock, durable, yaml_io

VERSION = 1
READ_LIMIT = MARKER_READ_LIMIT


class DispatchRecord(Struct, frozen=True, kw_only=True):
    role: str
    turn: Annotated[int, Meta(ge=0)] = 0
    max_turns: Annotated[int, Meta(ge=1)] | None = None
    pid: Annotated[int, Meta(ge=1)] | None = None
    pid_started_at: datetime | None = None

    def __post_init__(self) -> None:
        with_offsets(self, "pid_started_at")


class SnapshotRef(Struct, frozen=True, kw_only=True):
    ref: str
    commit: str
    at: datetime

    def __post_init__(self) -> None:
        with_offsets(self, "at")


class Marker(Struct, frozen=True, kw_only=True):
    version: int = VERSION
    skill: str = "impl"
    phase: str
    round: Annotated[int, Meta(ge=0)] | None = None
    task: Annotated[int, Meta(ge=0)] | None = None
    started_at: datetime
    last_updated: datetime
    ticket: str | None = None
    run: str | None = None
    owner: Owner | None = None
    dispatch: DispatchRecord | None = None
    snapshot: SnapshotRef | None = None

    def __post_init__(self) -> None:
        if self.version > VERSION:
            raise ValueError(f"version: {self.version} was written by a newer cairn; upgrade cairn")
        with_offsets(self, "started_at", "last_updated")

    def touched(self, **changes: Any) -> Marker:
        return msgspec.structs.replace(self, **{"last_updated": clock.now(), **changes})


def parse(text: str, path: Path) -> Marker:
    try:
        data = yaml_io.safe_load(text)
    except yaml_io.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise CorruptState(
            f"marker {path} is not valid YAML{where}; fix it or delete it "
            "(cairn catchup then infers the state from the run's files)"
        ) from None
    if not isinstance(data, dict):
        raise CorruptState(
            f"marker {path} is not a YAML mapping; fix it or delete it "
            "(cairn catchup then infers the state from the run's files)"
        )
    from cairn.util.invalid import problem

    try:
        return msgspec.convert(_dates_as_times(data), Marker, strict=False)
    except msgspec.ValidationError as exc:  # the data was not in shape
        key, why = problem(exc, Marker)
        raise CorruptState(
            f"marker {path}: {key or '(top level)'}: {why}; fix it or delete it"
        ) from None


def _dates_as_times(data: dict[Any, Any]) -> dict[Any, Any]:
    """A hand-written marker's dates (``started_at: 2026-11-29``) as midnight UTC."""
    return {
        key: datetime(value.year, value.month, value.day, tzinfo=UTC)
        if type(value) is date
        else value
        for key, value in data.items()
    }


def read(path: Path) -> Marker | None:
    data = durable.read_state_file(path, "marker", READ_LIMIT)
    if data is None:
        return None
    return parse(durable.decode_text(data, path, "marker"), path)


def _plain(value: Any) -> Any:
    """Plain data as the marker holds it: times as ISO text, no null keys."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items() if item is not None}
    return value


def as_data(record: Struct) -> dict[str, Any]:
    """A record as JSON data without its null keys (as events hold a dispatch or a snapshot)."""
    return {key: value for key, value in msgspec.to_builtins(record).items() if value is not None}


def render(marker: Marker) -> str:
    data = _plain(msgspec.to_builtins(marker, builtin_types=(datetime,)))
    return yaml_io.safe_dump(data, sort_keys=False, allow_unicode=True)


def write(path: Path, marker: Marker) -> None:
    text = render(marker)
    durable.atomic_write(path, text)


def remove(path: Path) -> bool:
    return durable.remove(path)


def judge(current: Marker, stale_after: float, now: datetime) -> tuple[TicketState, Liveness, str]:
    """The state a marker puts its ticket in, by owner liveness first and age second."""
    liveness, detail = owner.check(current.owner, current.last_updated, stale_after, now)
    age = (now - current.last_updated).total_seconds()
    if liveness in ("alive", "remote"):
        return "in_progress", liveness, detail
    if liveness == "dead":
        return "interrupted", liveness, detail
    if liveness == "remote_stale" or age > stale_after:
        return "stale", liveness, detail
    return "interrupted", liveness, detail
