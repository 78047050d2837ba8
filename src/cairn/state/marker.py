"""The progress marker ``tickets/<ticket>/.in-progress.yaml``: where a run is right now.

Rewritten atomically at every transition and removed when the run ends. A hand-written marker
with only the five original fields (``skill``, ``phase``, ``round``, ``started_at``,
``last_updated``) is accepted; times without an offset are taken as UTC.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from cairn.errors import CorruptState
from cairn.state import owner
from cairn.state.owner import Liveness, Owner, with_offset
from cairn.util import clock, durable, yaml_io
from cairn.util.records import After, Ge, Record, first_error

VERSION = 1
TicketState = Literal["in_progress", "interrupted", "stale", "done", "none"]
READ_LIMIT = 1024 * 1024

Time = Annotated[datetime, After(with_offset)]


def _known_version(value: int) -> int:
    if value > VERSION:
        raise ValueError(f"version {value} was written by a newer cairn; upgrade cairn")
    return value


class Dispatch(Record):
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
    dispatch: Dispatch | None = None
    snapshot: SnapshotRef | None = None

    def touched(self, **changes: Any) -> Marker:
        return self.model_copy(update={"last_updated": clock.now(), **changes})


_LINE = re.compile(r"( {2})?([a-z_]+):(?: (.*))?")
_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./@+-]*")
_INT = re.compile(r"0|[1-9][0-9]*")


def _fast_load(text: str) -> dict[str, Any] | None:
    """The mapping of a marker in the simple shape cairn writes; None for anything else.

    A marker rewritten at every transition is read by every ``cairn status``; PyYAML's
    constructor costs ~150 µs a marker even with libyaml, this ~15 µs. Every value it is not
    sure of sends the whole text to the full YAML parser, so both always agree.
    """
    data: dict[str, Any] = {}
    section: dict[str, Any] | None = None
    for line in text.split("\n"):
        if not line:
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            return None
        nested, key, raw = match.groups()
        if raw is None:
            if nested:
                return None
            section = data[key] = {}
            continue
        if nested:
            if section is None:
                return None
            target = section
        else:
            section, target = None, data
        if len(raw) >= 2 and raw[0] == raw[-1] == "'" and "'" not in raw[1:-1].replace("''", ""):
            target[key] = raw[1:-1].replace("''", "'")
        elif not _PLAIN.fullmatch(raw):
            return None
        else:
            kind = yaml_io.plain_scalar_tag(raw)
            if kind == "str":
                target[key] = raw
            elif kind == "int" and _INT.fullmatch(raw):
                target[key] = int(raw)
            else:
                return None
    return data or None


def parse(text: str, path: Path) -> Marker:
    try:
        data = _fast_load(text)
        if data is None:
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
    durable.atomic_write(path, render(marker))


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
