"""The progress marker ``tickets/<ticket>/.in-progress.yaml``: where a run is right now.

Rewritten atomically at every transition and removed when the run ends. A hand-written marker
with only the five original fields (``skill``, ``phase``, ``round``, ``started_at``,
``last_updated``) is accepted; times without an offset are taken as UTC.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from cairn.errors import CorruptState
from cairn.state import owner
from cairn.state.names import MARKER_READ_LIMIT
from cairn.state.owner import Liveness, Owner, with_offset
from cairn.util import clock, durable, yaml_io
from cairn.util.records import After, Ge, Record, first_error

VERSION = 1
TicketState = Literal["in_progress", "interrupted", "stale", "done", "none"]
READ_LIMIT = MARKER_READ_LIMIT

Time = Annotated[datetime, After(with_offset)]


def _known_version(value: int) -> int:
    if value > VERSION:
        raise ValueError(f"version {value} was written by a newer cairn; upgrade cairn")
    return value


class DispatchRecord(Record):
    role: str
    turn: Annotated[int, Ge(0)] = 0
    max_turns: Annotated[int, Ge(1)] | None = None
    pid: Annotated[int, Ge(1)] | None = None
    pid_started_at: Time | None = None


class SnapshotRef(Record):
    ref: str
    commit: str
    at: Time


class Marker(Record):
    version: Annotated[int, After(_known_version)] = VERSION
    skill: str = "impl"
    phase: str
    round: Annotated[int, Ge(0)] | None = None
    task: Annotated[int, Ge(0)] | None = None
    started_at: Time
    last_updated: Time
    ticket: str | None = None
    run: str | None = None
    owner: Owner | None = None
    dispatch: DispatchRecord | None = None
    snapshot: SnapshotRef | None = None

    def touched(self, **changes: Any) -> Marker:
        return self.model_copy(update={"last_updated": clock.now(), **changes})


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
    try:
        return Marker.model_validate(data)
    except ValueError as exc:  # pydantic's ValidationError: the data was not in shape
        key, why, _ = first_error(exc)
        raise CorruptState(
            f"marker {path}: {key or '(top level)'}: {why}; fix it or delete it"
        ) from None


def read(path: Path) -> Marker | None:
    data = durable.read_state_file(path, "marker", READ_LIMIT)
    if data is None:
        return None
    return parse(durable.decode_text(data, path, "marker"), path)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def render(marker: Marker) -> str:
    data = _plain(marker.model_dump(exclude_none=True))
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
