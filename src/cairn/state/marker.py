"""The progress marker ``tickets/<ticket>/.in-progress.yaml``: where a run is right now.

Rewritten atomically at every transition and removed when the run ends. cairn writes it as JSON
(indented, keys in the record's order, no null keys), which is YAML too: the file keeps its name
and any YAML tool reads it. A marker that is not JSON is read as YAML, so a hand-written one with
only the five original fields (``skill``, ``phase``, ``round``, ``started_at``,
``last_updated``) is accepted; times without an offset are taken as UTC. The records
(``Marker``, ``DispatchRecord``, ``SnapshotRef``) live in ``cairn.state.marker_records`` and are
loaded on first use: the heartbeat (``touch``) moves ``last_updated`` without them.
"""

from __future__ import annotations

import json

from cairn.state.names import MARKER_READ_LIMIT, MARKER_VERSION
from cairn.util import clock, durable, yaml_io

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path
    from typing import Any

    from msgspec import Struct

    from cairn.state.marker_records import DispatchRecord as DispatchRecord
    from cairn.state.marker_records import Marker as Marker
    from cairn.state.marker_records import SnapshotRef as SnapshotRef
    from cairn.state.owner import Liveness
    from cairn.terms import TicketState

VERSION = MARKER_VERSION
READ_LIMIT = MARKER_READ_LIMIT
RECORDS = ("Marker", "DispatchRecord", "SnapshotRef")  # in cairn.state.marker_records


def __getattr__(name: str) -> Any:
    if name in RECORDS:
        from cairn.state import marker_records

        return getattr(marker_records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse(text: str, path: Path) -> Marker:
    import msgspec

    from cairn.state.marker_records import Marker

    data = _load(text, path)
    try:
        return msgspec.convert(data, Marker, strict=False)
    except msgspec.ValidationError as exc:  # the data was not in shape
        from cairn.errors import CorruptState
        from cairn.util.invalid import problem

        key, why = problem(exc, Marker)
        raise CorruptState(
            f"marker {path}: {key or '(top level)'}: {why}; fix it or delete it"
        ) from None


def _load(text: str, path: Path) -> dict[Any, Any]:
    """The marker's data: JSON, as cairn writes it, else YAML (a marker written by hand)."""
    from cairn.errors import CorruptState

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = _load_yaml(text, path)
    if not isinstance(data, dict):
        raise CorruptState(
            f"marker {path} is not a YAML mapping; fix it or delete it "
            "(cairn catchup then infers the state from the run's files)"
        )
    return data


def _load_yaml(text: str, path: Path) -> Any:
    from cairn.errors import CorruptState

    try:
        data = yaml_io.safe_load(text)
    except yaml_io.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise CorruptState(
            f"marker {path} is not valid YAML{where}; fix it or delete it "
            "(cairn catchup then infers the state from the run's files)"
        ) from None
    return _dates_as_times(data) if isinstance(data, dict) else data


def _dates_as_times(data: dict[Any, Any]) -> dict[Any, Any]:
    """A hand-written marker's dates (``started_at: 2026-11-29``) as midnight UTC."""
    from datetime import UTC, date, datetime

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
    from datetime import datetime

    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items() if item is not None}
    return value


def as_data(record: Struct) -> dict[str, Any]:
    """A record as JSON data without its null keys (as events hold a dispatch or a snapshot)."""
    import msgspec

    return {key: value for key, value in msgspec.to_builtins(record).items() if value is not None}


def _encode(data: dict[str, Any]) -> str:
    """The marker's text: JSON, indented, that YAML reads as the same data."""
    return yaml_io.dump(data) + "\n"


def render(marker: Marker) -> str:
    from datetime import datetime

    import msgspec

    return _encode(_plain(msgspec.to_builtins(marker, builtin_types=(datetime,))))


def write(path: Path, marker: Marker) -> None:
    text = render(marker)
    durable.atomic_write(path, text)


def touch(path: Path) -> bool:
    """Move the marker's ``last_updated`` to now, rewriting it only when its second changed;
    False when there is no marker. The caller holds the ticket's lock.

    A marker as cairn writes it (a JSON object whose ``last_updated`` is text) gets that one
    value replaced; nothing else is read or validated. Any other (a marker written by hand in
    YAML) is read whole, as ``read`` reads it, and rewritten as JSON; one that does not validate
    is the error ``read`` gives, and nothing is written."""
    data = durable.read_state_file(path, "marker", READ_LIMIT)
    if data is None:
        return False
    text = durable.decode_text(data, path, "marker")
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        record = None
    version = record.get("version", VERSION) if type(record) is dict else None
    if type(version) is int and version <= VERSION and type(record.get("last_updated")) is str:
        now = clock.stamp()
        if record["last_updated"] != now:
            record["last_updated"] = now
            durable.atomic_write(path, _encode(record))
        return True
    write(path, parse(text, path).touched())
    return True


def remove(path: Path) -> bool:
    return durable.remove(path)


def judge(current: Marker, stale_after: float, now: datetime) -> tuple[TicketState, Liveness, str]:
    """The state a marker puts its ticket in, by owner liveness first and age second."""
    from cairn.state import owner

    liveness, detail = owner.check(current.owner, current.last_updated, stale_after, now)
    age = (now - current.last_updated).total_seconds()
    if liveness in ("alive", "remote"):
        return "in_progress", liveness, detail
    if liveness == "dead":
        return "interrupted", liveness, detail
    if liveness == "remote_stale" or age > stale_after:
        return "stale", liveness, detail
    return "interrupted", liveness, detail
